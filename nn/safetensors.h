// Safetensors: the weight format PyTorch and Hugging Face share, so weights move both ways.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header, then the raw
// little-endian tensor bytes. The header maps each tensor name to
//   {"dtype": "F32"|"BF16"|"I32"|"F64", "shape": [...], "data_offsets": [begin, end]}
// (offsets relative to the start of the data section), plus an optional "__metadata__" object of
// string -> string. glass pads the header with spaces so the data starts 8-byte aligned.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace glass {

struct SafeTensorsFile {
  std::string path;
  NamedTensors tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;

  bool contains(const std::string& name) const;
  // The tensor called `name`, or an error naming the file and the missing tensor.
  const Tensor& at(const std::string& name) const;
};

// Writes the tensors (any strides, any device: each is copied to host contiguously) in their own
// dtype, atomically (see engine/atomic_file.h). Names must be unique and not "__metadata__".
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads and validates the whole file, and puts each tensor on `device`. Every problem (missing or
// short file, bad header length, bad JSON, unknown dtype, offsets out of range or overlapping,
// shape not matching the byte count, truncated data) throws glass::Error naming the file.
SafeTensorsFile load_safetensors(const std::string& path, Device device = kCPU);

}  // namespace glass
