"""Tests of the renderer and the results schema: `python3 -m unittest discover -s scripts/bench`.
They write only into temporary directories.
"""
import copy
import json
import os
import tempfile
import unittest

import render


def classify_result(quick=False):
    names = ("ripgrep", "ripgrep_read", "wc", "lockwatch", "base")
    figures = {"lines": 5_000_000, "file_bytes": 588_000_000, "events": 50_000, "ripgrep_lines_matched": 150_000,
               "hyperfine_runs": 5}
    for i, name in enumerate(names, 1):
        figures.update({f"{name}_min_s": 0.2 * i, f"{name}_mean_s": 0.21 * i, f"{name}_gb_per_s": 2.94 / i,
                        f"{name}_lines_per_s": 25e6 / i, f"{name}_mean_lines_per_s": 23.8e6 / i})
    return {"section": "classify", "quick": quick, "build": {"commit": "a" * 40, "dirty": False},
            "base": {"revision": "f2bf837", "commit": "b" * 40}, "machine": {"cpu": "x", "cores": 2},
            "started": "2026-11-29T10:00:00Z", "finished": "2026-11-29T10:01:00Z", "figures": figures,
            "ratios": {"lockwatch_over_ripgrep": 2.0, "base_over_ripgrep": 3.0, "base_over_lockwatch": 1.5,
                       "lockwatch_over_ripgrep_mean": 2.0, "base_over_lockwatch_mean": 1.5}}


DOC = """# Title
before
<!-- bench:classify:table -->
old classify table
<!-- /bench:classify:table -->
between
<!-- bench:intake:table -->
old intake table
<!-- /bench:intake:table -->
| row | <!-- bench:classify:readme-this -->old cell<!-- /bench:classify:readme-this --> | x |
after
"""


class Replace(unittest.TestCase):
    def test_only_between_the_pair_of_a_section_with_results(self):
        text, used = render.replace(DOC, {"classify": classify_result()})
        self.assertEqual(used, {"classify"})
        self.assertNotIn("old classify table", text)
        self.assertIn("| ripgrep, `rg -c -i lock` (the floor) | 0.200 s (0.210 s) |", text)
        # everything outside the pair, and the other section's block, as it was
        self.assertTrue(text.startswith("# Title\nbefore\n<!-- bench:classify:table -->\n| one core"))
        self.assertIn("<!-- /bench:classify:table -->\nbetween\n<!-- bench:intake:table -->\nold intake table\n", text)
        self.assertTrue(text.endswith(" | x |\nafter\n"))

    def test_inline_markers_stay_on_their_line(self):
        text, _ = render.replace(DOC, {"classify": classify_result()})
        row = next(l for l in text.splitlines() if l.startswith("| row |"))
        self.assertEqual(row, "| row | <!-- bench:classify:readme-this -->6.2 M lines/s, 2.00× ripgrep's time"
                              "<!-- /bench:classify:readme-this --> | x |")

    def test_rendering_twice_changes_nothing_more(self):
        once, _ = render.replace(DOC, {"classify": classify_result()})
        twice, _ = render.replace(once, {"classify": classify_result()})
        self.assertEqual(once, twice)

    def test_no_results_leaves_the_text_as_it_is(self):
        self.assertEqual(render.replace(DOC, {}), (DOC, set()))

    def test_unpaired_or_crossed_markers_fail(self):
        for bad in ("<!-- bench:classify:table -->\nx\n",
                    "<!-- bench:classify:table -->\nx\n<!-- /bench:intake:table -->\n",
                    "<!-- /bench:classify:table -->\n<!-- bench:classify:table -->\n"):
            with self.assertRaises(render.RenderError):
                render.replace(bad, {})

    def test_a_table_the_section_does_not_have_fails(self):
        with self.assertRaises(render.RenderError):
            render.replace("<!-- bench:classify:nosuch -->\nx\n<!-- /bench:classify:nosuch -->\n",
                           {"classify": classify_result()})


class Docs(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        os.makedirs(os.path.join(self.root, "docs"))
        with open(os.path.join(self.root, "docs/p.md"), "w") as f:
            f.write(DOC)

    def tearDown(self):
        self.dir.cleanup()

    def doc(self):
        with open(os.path.join(self.root, "docs/p.md")) as f:
            return f.read()

    def results(self, *docs):
        path = os.path.join(self.root, "results")
        os.makedirs(path, exist_ok=True)
        for d in docs:
            with open(os.path.join(path, f"{d['section']}.json"), "w") as f:
                json.dump(d, f)
        return render.load(path)

    def test_quick_results_are_refused_and_the_docs_left_alone(self):
        results = self.results(classify_result(quick=True))
        with self.assertRaisesRegex(render.RenderError, "quick"):
            render.render_docs(results, self.root, ("docs/p.md",))
        self.assertEqual(self.doc(), DOC)
        self.assertIn("quick run", render.summary(results))

    def test_a_missing_results_file_leaves_its_block(self):
        changed, used = render.render_docs(self.results(classify_result()), self.root, ("docs/p.md",))
        self.assertEqual((changed, used), (["docs/p.md"], {"classify"}))
        self.assertIn("old intake table", self.doc())

    def test_load_checks_every_file(self):
        bad = classify_result()
        bad["figures"]["lines"] = "5,000,000"
        with self.assertRaises(render.RenderError):
            self.results(bad)


class Schema(unittest.TestCase):
    def test_a_results_file_holds_raw_numbers(self):
        good = classify_result()
        render.check_result(good)
        for path, value in ((("figures", "lines"), "5 M"), (("ratios", "base_over_ripgrep"), float("nan")),
                            (("build", "dirty"), "yes"), (("section",), "nosuch")):
            bad = copy.deepcopy(good)
            target = bad
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            with self.assertRaises(render.RenderError, msg=path):
                render.check_result(bad)

    def test_no_base_and_nested_figures_are_allowed(self):
        doc = classify_result()
        doc["base"] = None
        doc["figures"]["runs"] = [{"exact": None, "burst_s": 3.5, "counted": True}]
        render.check_result(doc)


if __name__ == "__main__":
    unittest.main()
