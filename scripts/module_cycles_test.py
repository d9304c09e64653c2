#!/usr/bin/env python3
"""Tests of module-cycles.py on small crates written to a temporary folder: cycles through
every way Rust names a module (paths in code, `use` with braces nested or not, `super`), none
reported where there is none, and a test module's imports left out.

    python3 scripts/module_cycles_test.py
"""
import importlib.util
import os
import shutil
import tempfile
import unittest

spec = importlib.util.spec_from_file_location("module_cycles", os.path.join(os.path.dirname(__file__), "module-cycles.py"))
module_cycles = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_cycles)


def crate(test, files):
    root = tempfile.mkdtemp()
    test.addCleanup(shutil.rmtree, root)
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)
    return root


class ModuleCycles(unittest.TestCase):
    def test_braced_use_is_read(self):
        root = crate(self, {"lib.rs": "mod a; mod b; mod c;", "a.rs": "use crate::{b, c};", "b.rs": "use crate::a::f;", "c.rs": ""})
        self.assertEqual(module_cycles.cycles(root), ["a -> b -> a"])

    def test_nested_braces_and_multi_line_use(self):
        root = crate(self, {
            "lib.rs": "",
            "a.rs": "use crate::{\n    c,\n    d::{x, y::{Z}},\n};",
            "c.rs": "",
            "d/mod.rs": "mod y;",
            "d/y.rs": "use crate::a::Thing;",
        })
        self.assertEqual(module_cycles.cycles(root), ["a -> d::y -> a"])

    def test_super_in_braces(self):
        root = crate(self, {"lib.rs": "", "m/mod.rs": "use self::p;", "m/p.rs": "use super::{q, Shared};", "m/q.rs": "use super::p::f;"})
        self.assertEqual(module_cycles.cycles(root), ["m::p -> m::q -> m::p"])

    def test_paths_written_in_code(self):
        root = crate(self, {"lib.rs": "", "a.rs": "fn f() { crate::b::g() }", "b.rs": "fn g() { let _ = crate::a::X; }"})
        self.assertEqual(module_cycles.cycles(root), ["a -> b -> a"])

    def test_no_cycle_where_there_is_none(self):
        root = crate(self, {"lib.rs": "", "a.rs": "use crate::{b::{self, B}, c};", "b.rs": "use crate::c::C;", "c.rs": "use std::{io, fmt};"})
        self.assertEqual(module_cycles.cycles(root), [])

    def test_a_test_module_is_left_out(self):
        root = crate(self, {"lib.rs": "", "a.rs": "use crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::{a, b};\n}", "b.rs": "#[cfg(test)]\nmod tests {\n    use crate::a;\n}"})
        self.assertEqual(module_cycles.cycles(root), [])

    def test_expand(self):
        self.assertEqual(module_cycles.expand("crate::{a, b::{c, d}, e::F}"), ["crate::a", "crate::b::c", "crate::b::d", "crate::e::F"])
        self.assertEqual(module_cycles.expand("crate::{x::Y as Z, w as _}"), ["crate::x::Y", "crate::w"])


if __name__ == "__main__":
    unittest.main()
