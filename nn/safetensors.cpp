// Safetensors reading and writing; see safetensors.h for the layout.
#include "nn/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "autograd/ops.h"
#include "engine/atomic_file.h"

namespace glass {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; glass reads and writes it as-is");

namespace {

constexpr std::pair<DType, const char*> kDTypeNames[] = {
    {DType::f32, "F32"}, {DType::bf16, "BF16"}, {DType::i32, "I32"}, {DType::f64, "F64"}};

const char* safetensors_dtype(DType t) {
  for (const auto& [dtype, name] : kDTypeNames)
    if (dtype == t) return name;
  fail("save_safetensors: dtype {} has no safetensors name", dtype_name(t));
}

// One tensor's header entry, validated on its own.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& info) {
  auto bad = [&](const std::string& why) -> Entry {
    fail("load_safetensors {}: tensor '{}': {} (entry: {})", path, name, why, info.dump());
  };
  if (!info.is_object()) return bad("the entry is not a JSON object");
  if (!info.contains("dtype") || !info["dtype"].is_string()) return bad("no string \"dtype\"");
  if (!info.contains("shape") || !info["shape"].is_array()) return bad("no array \"shape\"");
  if (!info.contains("data_offsets") || !info["data_offsets"].is_array() ||
      info["data_offsets"].size() != 2)
    return bad("no \"data_offsets\" pair");
  Entry e{name, DType::f32, {}, 0, 0};
  const std::string dtype = info["dtype"];
  const auto* known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                   [&](const auto& p) { return dtype == p.second; });
  if (known == std::end(kDTypeNames))
    return bad(fmt::format("unsupported dtype '{}' (glass reads F32, BF16, I32, F64)", dtype));
  e.dtype = known->first;
  // The element count must not overflow on its way to the byte count.
  uint64_t numel = 1;
  for (const auto& d : info["shape"]) {
    if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
    const uint64_t n = d.get<uint64_t>();
    if (n != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / n)
      return bad("shape is impossibly large");
    numel *= n;
    e.shape.push_back(static_cast<int64_t>(n));
  }
  for (const auto& o : info["data_offsets"])
    if (!o.is_number_unsigned()) return bad("data_offsets must be non-negative integers");
  e.begin = info["data_offsets"][0].get<uint64_t>();
  e.end = info["data_offsets"][1].get<uint64_t>();
  if (e.end < e.begin) return bad("data_offsets end before they begin");
  const uint64_t need = numel * dtype_size(e.dtype);
  if (e.end - e.begin != need)
    return bad(fmt::format("{}{} needs {} bytes but data_offsets span {}", dtype,
                           shape_str(e.shape), need, e.end - e.begin));
  return e;
}

}  // namespace

bool SafeTensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const auto& p) { return p.first == name; });
}

const Tensor& SafeTensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  fail("{}: no tensor named '{}' ({} tensors in the file)", path, name, tensors.size());
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // 1. Header: metadata first, then each tensor with its byte range, in the given order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    GLASS_CHECK(!name.empty() && name != "__metadata__",
                "save_safetensors {}: invalid tensor name '{}'", path, name);
    GLASS_CHECK(seen.insert(name).second, "save_safetensors {}: tensor name '{}' appears twice",
                path, name);
    GLASS_CHECK(t.defined(), "save_safetensors {}: tensor '{}' is undefined", path, name);
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  // 2. Pad the JSON with spaces so that the data section starts on an 8-byte boundary.
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t header_len = json.size();

  // 3. Length, header, then every tensor's bytes, copied to host in row-major order.
  write_file_atomic(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(&header_len), 8);
    out.write(json.data(), static_cast<std::streamsize>(json.size()));
    std::vector<char> host;
    for (const auto& [name, t] : tensors) {
      if (t.numel() == 0) continue;  // no bytes (and no buffer to copy into)
      const Tensor c = contiguous(t.detach());
      host.resize(c.nbytes());
      c.copy_to_host(host.data());
      out.write(host.data(), static_cast<std::streamsize>(host.size()));
    }
  });
}

SafeTensorsFile load_safetensors(const std::string& path, Device device) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("load_safetensors {}: cannot open: {}", path, std::strerror(errno));
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);

  // 1. The header length, and the header, which must fit in the file.
  if (file_size < 8)
    fail(
        "load_safetensors {}: the file is {} bytes, too short for the 8-byte header length; not a "
        "safetensors file",
        path, file_size);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  if (header_len > file_size - 8)
    fail(
        "load_safetensors {}: header length {} exceeds the {} bytes that follow it; truncated or "
        "not a safetensors file",
        path, header_len, file_size - 8);
  std::string json(header_len, '\0');
  in.read(json.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail("load_safetensors {}: could not read the {}-byte header", path, header_len);
  const uint64_t data_size = file_size - 8 - header_len;

  // 2. Parse and validate every entry before reading any data.
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    fail("load_safetensors {}: the header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("load_safetensors {}: the header is not a JSON object", path);
  SafeTensorsFile file;
  file.path = path;
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(parse_entry(path, name, info));
      continue;
    }
    if (!info.is_object()) fail("load_safetensors {}: __metadata__ is not a JSON object", path);
    for (const auto& [key, value] : info.items()) {
      if (!value.is_string())
        fail("load_safetensors {}: __metadata__ value of '{}' is not a string", path, key);
      file.metadata[key] = value.get<std::string>();
    }
  }

  // 3. Byte ranges, in file order: inside the data section and not overlapping.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t prev_end = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (prev && e.begin < prev_end)
      fail("load_safetensors {}: tensor '{}' bytes [{}, {}) overlap tensor '{}' bytes [{}, {})",
           path, e.name, e.begin, e.end, prev->name, prev->begin, prev->end);
    if (e.end > data_size)
      fail(
          "load_safetensors {}: tensor '{}' bytes [{}, {}) run past the {}-byte data section; the "
          "file is truncated or its header is wrong",
          path, e.name, e.begin, e.end, data_size);
    prev_end = e.end;
    prev = &e;
  }

  // 4. Read each tensor into host memory, then move it to the device.
  for (const Entry& e : entries) {
    Tensor host = Tensor::empty(e.shape, e.dtype, kCPU);
    in.seekg(static_cast<std::streamoff>(8 + header_len + e.begin));
    in.read(static_cast<char*>(host.raw_data()), static_cast<std::streamsize>(e.end - e.begin));
    if (!in) fail("load_safetensors {}: reading tensor '{}' failed: truncated file", path, e.name);
    file.tensors.emplace_back(
        e.name,
        device == kCPU ? host : Tensor::from_host(host.raw_data(), e.shape, e.dtype, device));
  }
  return file;
}

}  // namespace glass
