# A torch that cannot be imported: put first on PYTHONPATH by the oracle-required tests
# (tests/CMakeLists.txt) to show that a missing PyTorch fails `make test` instead of skipping.
raise ImportError("deliberately broken torch (tests/oracle/broken_torch)")
