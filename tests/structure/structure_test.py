"""The tree keeps the shape the project set itself (docs/design.md,
"Components and their seams"): small files, small functions, and folders
that include only what the map says they may use, without a cycle. A
failure names the file, function or include and the rule."""
import os
import shutil
import tempfile
import unittest

import structure


class StructureTest(unittest.TestCase):
    def test_no_source_file_is_over_800_lines(self):
        long = [(p, n) for p in structure.source_files()
                if (n := len(structure.read(p).splitlines())) > structure.MAX_FILE_LINES]
        self.assertEqual(long, [], "split these files (a new concern gets its own file)")

    def test_no_function_is_over_120_lines(self):
        long = [f"{p}:{first} {name} ({n} lines)" for p in structure.source_files()
                for n, first, name in structure.functions(p) if n > structure.MAX_FUNCTION_LINES]
        self.assertEqual(long, [], "split these functions")

    def test_the_function_finder_sees_a_function_and_not_its_data(self):
        # The finder itself, on a file of its own making: a table at
        # namespace scope is not a function; a lambda is part of its function.
        path = os.path.join(tempfile.mkdtemp(), "probe.cc")
        with open(path, "w") as f:
            f.write('namespace a {\nconst int kT[] = {\n1,\n2};\n'
                    'int F(int x) {\n  auto g = [](int y) { return y; };\n'
                    '  const char* s = "}{";\n  return g(x);\n}\n'
                    'struct S {\n  int M() const {\n    return 1;\n  }\n};\n}  // namespace a\n')
        try:
            found = structure.functions(path)  # an absolute path is read as it is
        finally:
            shutil.rmtree(os.path.dirname(path))
        self.assertEqual([(n, first) for n, first, _ in found], [(4, 5), (2, 11)])

    def test_every_folder_is_on_the_map_and_includes_only_what_it_may_use(self):
        allowed = structure.design_map()
        graph = structure.include_graph()
        missing = sorted(f for f in graph if f and f not in allowed)
        self.assertEqual(missing, [], "add a row for these folders to docs/design.md")
        wrong = [f"{f}/ includes {t}/" for f, targets in sorted(graph.items())
                 if f in allowed and allowed[f] is not None
                 for t in sorted(targets) if t != "common" and t not in allowed[f]]
        self.assertEqual(wrong, [], "either the include is wrong or docs/design.md's map is")

    def test_the_folders_include_each_other_without_a_cycle(self):
        self.assertEqual(structure.cycles(structure.include_graph()), [])


if __name__ == "__main__":
    unittest.main()
