"""benchmarks/class_load.py end to end, small: the real server, 4 students (2 of them Chromium tabs), a restart.

The benchmark's own checks (every acknowledged answer stored once, with the choice clicked; no
stored row lost across the restart; every student reconnects and finishes) on 4 students × 3
triplets, so the load test keeps working; its figures with 30 students are the benchmark's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from .driver import REPO


def test_the_class_load_benchmark_runs_and_loses_nothing_across_a_restart(tmp_path):
    out = tmp_path / "class-load.json"
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "class_load.py"), "--students", "4",
                          "--triplets", "3", "--join-window", "2", "--pause", "0.2", "0.6", "--deadline", "240",
                          "--exit-status", "kept", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    res = json.loads(out.read_text())
    assert [r["name"] for r in res["runs"]] == ["steady", "restart"]
    assert res["kept"] == {"steady": True, "restart": True}, res["kept"]
    for run in res["runs"]:
        a = run["answers"]
        assert a["stored"] == a["acknowledged"] == a["expected"] == 12, a
        assert a["duplicates"] == a["mismatched"] == a["acknowledged_not_stored"] == a["stored_for_no_student"] == 0
        assert a["students_complete"] == 4 and not run["failures"], run["failures"]
        assert run["answer_to_next_s"]["p95"] > 0  # measured; its target is the 30-student benchmark's, idle
        assert run["answer_to_next_s"]["n"] + run.get("restart", {}).get("answers_across_restart_s", {}).get("n", 0) == 12
        assert run["server"]["cpu_s"] > 0 and run["server"]["rss_mb_peak"] > 100
        assert run["lecturer"]["answers_shown"] == "12", run["lecturer"]
    restart = res["runs"][1]["restart"]
    assert restart["lost_after_restart"] == 0 and restart["stored_at_stop"] >= 6
    assert restart["reconnects"] >= 4 - res["config"]["browser_students"]  # the browser tabs reconnect by themselves
    assert res["runs"][1]["browser_students"] == 2 and res["runs"][1]["answer_to_next_browser_s"]["n"] >= 1
    assert res["host"] and res["machine"]["cpus"] >= 1
