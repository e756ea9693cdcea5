// What a custom plan written as a Python module may import (python_plan.h):
// torch's style and placement names from the modules the reference imports
// them from, and typing's names for annotations. Free of libtorch, so the
// plan-file fuzz target builds it.
#pragma once

#include "config/python_data.h"

namespace tessel::parallel {

const config::PythonImports& plan_file_imports();

}  // namespace tessel::parallel
