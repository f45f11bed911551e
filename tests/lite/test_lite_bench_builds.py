"""`make bench`'s JupyterLite section times a first build and a rebuild after one notebook edit.
The builds here are stand-ins (the real ones take a minute and are the benchmark's job): what is
checked is the path the timings take: an empty bytecode cache for the first build, the same
output folder rebuilt after the notebook gained a cell, the cache setting restored, and both
times in the printed report."""

from __future__ import annotations

import nbformat

from bench import lite_bench
from lite_build import build as lite_build_module


def test_first_build_and_rebuild_after_one_notebook_edit_are_timed(tmp_path, monkeypatch):
    calls = []

    def fake_build_site(output_dir, contents, **options):
        (notebook,) = contents
        calls.append(
            {
                "output_dir": output_dir,
                "cells": len(nbformat.read(notebook, as_version=4).cells),
                "cache": lite_build_module.BYTECODE_CACHE,
                "cache_empty": not any(lite_build_module.BYTECODE_CACHE.glob("*"))
                if lite_build_module.BYTECODE_CACHE.exists()
                else True,
                "options": options,
            }
        )
        lite_build_module.BYTECODE_CACHE.mkdir(parents=True, exist_ok=True)
        (lite_build_module.BYTECODE_CACHE / f"compiled-{len(calls)}").write_text("x")
        return {"total_bytes": 1, "total_files": 1}

    monkeypatch.setattr(lite_bench, "build_site", fake_build_site)
    before = lite_build_module.BYTECODE_CACHE
    sites, _manifests, build_s, rebuild_s = lite_bench.build_and_rebuild(tmp_path, ("old", "new"))

    assert lite_build_module.BYTECODE_CACHE == before  # the user's cache setting is back
    assert [c["output_dir"] for c in calls] == [sites["old"], sites["old"], sites["new"], sites["new"]]
    assert [c["cells"] for c in calls] == [1, 2, 2, 3]  # each rebuild follows a one-cell edit
    assert all(c["cache"] == tmp_path / "bytecode-cache" for c in calls)
    assert calls[0]["cache_empty"] and not calls[1]["cache_empty"]  # a first build finds nothing compiled
    assert [c["options"] for c in calls] == [lite_bench.VARIANTS["old"]] * 2 + [lite_bench.VARIANTS["new"]] * 2
    assert set(build_s) == set(rebuild_s) == {"old", "new"}
    assert all(isinstance(v, float) and v >= 0 for v in [*build_s.values(), *rebuild_s.values()])


def test_the_report_prints_both_build_times():
    run = {"first_diagram_visible_s": 1.5, "kernel_ready_s": 7.0, "setup_cell_done_s": 8.0, "first_diagram_s": 9.0}
    variant = {
        "build_s": 61.2,
        "rebuild_after_notebook_edit_s": 4.3,
        "site_bytes": 40e6,
        "runs": [run],
        "median_kernel_ready_s": 7.0,
        "median_setup_cell_done_s": 8.0,
        "median_first_diagram_s": 9.0,
        "median_first_diagram_visible_s": 1.5,
        "median_bytes_to_kernel_ready": 20e6,
        "median_bytes_to_first_diagram": 28e6,
    }
    text = lite_bench.report(
        {
            "variants": {"new": variant},
            "runs_per_variant": 1,
            "cores": 2,
            "load_average_before": [1.0],
            "load_average_after": [1.0],
        }
    )
    lines = {line.strip().rsplit("  ", 1)[0].strip(): line.split()[-2:] for line in text.splitlines()}
    assert lines["page open -> first diagram visible"] == ["1.5", "s"], text
    assert lines["first build"] == ["61.2", "s"], text
    assert lines["rebuild after a notebook edit"] == ["4.3", "s"], text
