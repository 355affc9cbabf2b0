#include "admission/trainer_imports.h"

#include <gtest/gtest.h>

namespace stoker::admission {
namespace {

std::vector<std::string> Modules(std::string_view source) {
  std::vector<std::string> out;
  for (const ModuleImport& m : ModuleLevelImports(source)) out.push_back(m.module);
  return out;
}

TEST(TrainerImportsTest, ReadsModuleLevelImportsInOrderOnceEach) {
  const char* source =
      "\"\"\"A trainer.\"\"\"\n"
      "import os, sys\n"
      "import tensorflow as tf  # the framework\n"
      "from tensorflow.keras import layers\n"
      "import numpy.linalg as la; import torch\n"
      "from sklearn.model_selection import train_test_split\n";
  EXPECT_EQ(Modules(source),
            (std::vector<std::string>{"os", "sys", "tensorflow", "numpy", "sklearn"}));
  EXPECT_EQ(ModuleLevelImports(source)[2].line, 3);
}

TEST(TrainerImportsTest, LeavesOutOptionalAndRelativeImports) {
  const char* source =
      "try:\n"
      "    import tensorflow\n"
      "except ImportError:\n"
      "    tensorflow = None\n"
      "def f():\n"
      "    import xgboost\n"
      "from . import util\n"
      "from .model import Net\n"
      "important = 1\n"
      "fromage = 2\n"
      "# import torch\n"
      "import torch";  // no newline at the end
  EXPECT_EQ(Modules(source), (std::vector<std::string>{"torch"}));
}

TEST(TrainerImportsTest, FindsTheModulesFileWithOrWithoutTheSdistRoot) {
  EXPECT_TRUE(IsModuleFile("trainer/task.py", "trainer.task"));
  EXPECT_TRUE(IsModuleFile("trainer-0.1/trainer/task.py", "trainer.task"));
  EXPECT_TRUE(IsModuleFile("task.py", "task"));
  EXPECT_FALSE(IsModuleFile("a/b/trainer/task.py", "trainer.task"));
  EXPECT_FALSE(IsModuleFile("trainer/task.pyc", "trainer.task"));
  EXPECT_FALSE(IsModuleFile("trainer/task.py", ""));
}

}  // namespace
}  // namespace stoker::admission
