// The safetensors dtype strings ("F32", "BF16", ...) and the torch scalar
// types they stand for. One table, used by the reader (to validate headers and
// build tensors) and by the writer (to name dtypes), so both agree by
// construction.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessel::io {

// The torch type for a safetensors dtype string; nullopt when tessel cannot
// load it (unknown, or a type torch 1.13 lacks such as U16/U32/U64/F8_*).
std::optional<c10::ScalarType> scalar_type_from_safetensors(std::string_view dtype);

// The safetensors dtype string for a torch type; throws tessel::Error for
// types safetensors cannot store (complex, quantized).
std::string safetensors_dtype_name(c10::ScalarType type);

// Bytes per element as stored in the file (BOOL is one byte, as in torch).
int64_t safetensors_itemsize(c10::ScalarType type);

// "BF16, BOOL, F16, ..." for error messages that list what is accepted.
std::string supported_safetensors_dtypes();

// The names config.json's "torch_dtype" gives the floating types a model is
// stored in ("float32", "bfloat16", "float16", "float64"), and back; nullopt
// for another name. torch_dtype_name of another type is c10's name for it.
std::optional<c10::ScalarType> floating_type_from_torch_name(std::string_view name);
std::string torch_dtype_name(c10::ScalarType type);

}  // namespace tessel::io
