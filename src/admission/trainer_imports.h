// What a trainer's own source says it imports, read at submission so that
// a framework the job's interpreter lacks is refused then, with the fix,
// instead of failing the job at run time ("No module named 'tensorflow'").
// Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace stoker::admission {

struct ModuleImport {
  std::string module;  // the top-level package: "tensorflow" for `import tensorflow.keras`
  int line = 0;        // 1-based
};

// The packages `source` (Python) imports unconditionally at module level:
// `import a.b, c as d` and `from a.b import x` starting at column 0. An
// import inside a try, an if or a function is indented and not counted (it
// may be optional); relative imports (`from . import x`) are the package's
// own. In the order they appear, each package once.
std::vector<ModuleImport> ModuleLevelImports(std::string_view source);

// Whether `member`, a path inside a package archive, is the file of the
// Python module `module` ("trainer.task": "trainer/task.py", also under the
// archive's root directory, "trainer-0.1/trainer/task.py").
bool IsModuleFile(std::string_view member, std::string_view module);

}  // namespace stoker::admission
