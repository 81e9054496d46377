"""The SDK's build backend (_build/backend.py) reads pyproject.toml with
tomllib on Python 3.11+ and with its own small parser before: both must
read the same [project] table."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "_build"))

import backend  # noqa: E402


class BuildBackendTest(unittest.TestCase):
    def test_subset_parser_reads_what_tomllib_reads(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("no tomllib before Python 3.11")
        with open(os.path.join(os.path.dirname(HERE), "pyproject.toml"), "rb") as f:
            text = f.read().decode("utf-8")
        self.assertEqual(backend._parse_toml_subset(text)["project"], tomllib.loads(text)["project"])

    def test_metadata_names_the_package(self):
        meta = backend._metadata(backend._project())
        self.assertIn("Name: sundial-sdk\n", meta)
        self.assertIn("Requires-Python: >=3.9\n", meta)


if __name__ == "__main__":
    unittest.main()
