"""Lay a partial benchmark run over the committed reference run, keeping provenance.

    python scripts/merge_bench.py NEW.json [--onto REF.json] [--whole-groups] --out OUT.json

A full ``make bench-run`` takes most of an hour; when only some groups changed, a run of
those groups can replace their rows in the reference. Every benchmark of NEW replaces the
reference's benchmark of the same name (and a paired record its record of the same key);
the rest of the reference is kept. With ``--whole-groups`` a group NEW measured is NEW's
alone: the reference's other rows of that group (a row the new run no longer has, such as
an AVX-512 row measured on another machine that had the instructions) are dropped, for a
table whose rows are compared with each other; the "paired" group is never dropped whole
(each of its records is a target's own comparison, replaced by key). Without it, rows the
new run did not measure (an opt-in day's, say) stay, and the label says they are older.
The output's machine and commit are NEW's, and ``merged_from`` names the earlier run (its
commit, date, CPU: a merge may lay one machine's rows over another's, and every table
must say so) and the groups whose rows still come from it, so scripts/figures.py can say
on every table which rows are older.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "chapters" / "generated" / "bench-reference.json"
SHARED_GROUP = "paired"  # the speed targets' records: one comparison each, merged by key


def key(b: dict[str, Any]) -> str:
    paired = (b.get("extra_info") or {}).get("paired")
    if isinstance(paired, dict):
        return f"paired:{paired.get('key')}"
    return str(b.get("fullname") or b.get("name"))


def merge(new: dict[str, Any], ref: dict[str, Any], whole_groups: bool = False
          ) -> dict[str, Any]:
    fresh = {key(b) for b in new.get("benchmarks", [])}
    # --whole-groups: the groups the new run measured lose their older rows.
    replaced = ({str(b.get("group")) for b in new.get("benchmarks", [])} - {SHARED_GROUP}
                if whole_groups else set())
    cpu = ((ref.get("machine_info") or {}).get("cpu") or {}).get("brand_raw", "")
    stamp = {"commit": str((ref.get("commit_info") or {}).get("id", "?"))[:10],
             "date": str(ref.get("datetime", ""))[:10], "cpu": str(cpu)}
    kept = []
    for b in ref.get("benchmarks", []):
        if key(b) in fresh or str(b.get("group")) in replaced:
            continue
        b = dict(b)
        info = dict(b.get("extra_info") or {})
        info.setdefault("measured_at", stamp)  # an older merge's stamp stays
        b["extra_info"] = info
        kept.append(b)
    out = dict(new)
    out["benchmarks"] = list(new.get("benchmarks", [])) + kept
    runs: dict[tuple[str, str, str], set[str]] = {}
    for b in kept:
        at = b["extra_info"]["measured_at"]
        run = (str(at["commit"]), str(at["date"]), str(at.get("cpu", "")))  # older: no cpu
        runs.setdefault(run, set()).add(str(b.get("group")))
    out["merged_from"] = [{"commit": c, "date": d, "cpu": cpu, "groups": sorted(g)}
                          for (c, d, cpu), g in sorted(runs.items(), key=lambda kv: kv[0][1])]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new", type=Path)
    parser.add_argument("--onto", type=Path, default=REFERENCE)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--whole-groups", action="store_true",
                        help="drop the reference's other rows of every group NEW measured")
    args = parser.parse_args(argv)
    new = json.loads(args.new.read_text(encoding="utf-8"))
    ref = json.loads(args.onto.read_text(encoding="utf-8"))
    out = merge(new, ref, whole_groups=args.whole_groups)
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"merge_bench: {len(new.get('benchmarks', []))} new + "
          f"{len(out['benchmarks']) - len(new.get('benchmarks', []))} kept -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
