#include "io/safetensors_dtype.h"

#include <c10/core/ScalarType.h>

#include <array>
#include <utility>

#include "core/error.h"

namespace tessel::io {
namespace {

struct DtypeEntry {
  std::string_view name;
  c10::ScalarType type;
};

// Names as in the safetensors specification; the types torch 1.13 has.
constexpr std::array<DtypeEntry, 10> kDtypes{{
    {"F64", c10::ScalarType::Double},
    {"F32", c10::ScalarType::Float},
    {"F16", c10::ScalarType::Half},
    {"BF16", c10::ScalarType::BFloat16},
    {"I64", c10::ScalarType::Long},
    {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},
    {"I8", c10::ScalarType::Char},
    {"U8", c10::ScalarType::Byte},
    {"BOOL", c10::ScalarType::Bool},
}};

}  // namespace

std::optional<c10::ScalarType> scalar_type_from_safetensors(std::string_view dtype) {
  for (const auto& e : kDtypes) {
    if (e.name == dtype) return e.type;
  }
  return std::nullopt;
}

std::string safetensors_dtype_name(c10::ScalarType type) {
  for (const auto& e : kDtypes) {
    if (e.type == type) return std::string(e.name);
  }
  throw Error(fmt::format("tensor dtype {} cannot be stored in safetensors (supported: {})",
                          c10::toString(type), supported_safetensors_dtypes()));
}

int64_t safetensors_itemsize(c10::ScalarType type) {
  return static_cast<int64_t>(c10::elementSize(type));
}

std::string supported_safetensors_dtypes() {
  std::string out;
  for (const auto& e : kDtypes) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

std::optional<c10::ScalarType> floating_type_from_torch_name(std::string_view name) {
  for (const auto type : {c10::ScalarType::Float, c10::ScalarType::BFloat16, c10::ScalarType::Half,
                          c10::ScalarType::Double}) {
    if (torch_dtype_name(type) == name) return type;
  }
  return std::nullopt;
}

std::string torch_dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Double: return "float64";
    default: return c10::toString(type);
  }
}

}  // namespace tessel::io
