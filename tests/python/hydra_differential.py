#!/usr/bin/env python3
"""Differential test of wavetrain's config engine against the real Hydra.

    hydra_differential.py WAVETRAIN_BINARY CASES_DIR [--case NAME ...] [--verbose]

Run it with the Python that has hydra-core 1.3 and omegaconf 2.3 (the project's .venv):

    .venv/bin/python tests/python/hydra_differential.py build/cli/wavetrain tests/data/hydra_cases

Each case is a folder of CASES_DIR holding a config tree (config.yaml, group folders) and a
`case.yaml` (read with PyYAML's safe_load):

    config_name: config          # the primary config (default: config)
    overrides: [model=lstm]      # the command line, one override per item
    expect: error                # optional: both must fail (Hydra raises, wavetrain exits non-zero)
    resolve: true                # optional: also compare the resolved config
    mode: jobs                   # optional: a sweep; compare the job lists instead of configs
    wavetrain_expected:          # only for the cases in INTENDED_DIFFERENCES: wavetrain's own
      config: {...}              #   documented result (any of config, resolved, jobs, error: true)

Hydra side: hydra.compose() with the case folder as the only config dir, converted with
OmegaConf.to_container(resolve=False) (and resolve=True for `resolve: true`). For sweeps, Hydra's
own override parser and BasicSweeper.split_arguments() give the job list.
wavetrain side: `WAVETRAIN_BINARY train --cfg job [--resolve] -cn NAME OVERRIDES` (or
`train --info jobs -m -cn NAME OVERRIDES`) with WAVETRAIN_CONFIG_DIR set to the case folder and no
--config-dir, so that the case's tree is the whole search path; its YAML is read with the YAML 1.2
core schema (the schema wavetrain writes), not PyYAML's YAML 1.1 defaults.

Trees are compared exactly: keys, key order, values and types (bool, int, float, str, None are all
distinct; NaN equals NaN). Jobs are compared in order, and each job's overrides in order, as the
(prefix, key, package, typed value) that Hydra's parser reads from each override's text.

Prints `PASS name`, `FAIL name: <diff>` or `DIFF-INTENDED name: <reason>` per case and a count;
exits 0 only when no case fails.
"""

import argparse
import concurrent.futures
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

import yaml

# Keys wavetrain adds to `--cfg job` output that are framework metadata rather than the user's
# config. wavetrain's compose() adds none (checked in trainer/config/compose.cpp and
# cli/train_command.cpp: the composed tree is printed as is), so nothing is stripped. Hydra's own
# `hydra` node is not in compose()'s output (return_hydra_config=False).
WAVETRAIN_METADATA_KEYS = []

# Cases where wavetrain differs from Hydra on purpose (docs/config.md). Each such case's case.yaml
# holds `wavetrain_expected`, wavetrain's documented result, which is checked: the case fails if
# wavetrain does not give it.
INTENDED_DIFFERENCES = {
    "equals_in_value": "docs/config.md (Differences from Hydra): '=' inside a value needs no escape in wavetrain "
    "(s=x=y is the string 'x=y'); Hydra's grammar rejects the second '='",
    "yaml_11_bool_words": "docs/config.md (Differences from Hydra): config files are read with the YAML 1.2 core "
    "schema, so yes/on/off/no/y are strings; Hydra (PyYAML, YAML 1.1) reads yes/on/off/no as bools",
    "yaml_underscore_int": "docs/config.md (Differences from Hydra): config files are read with the YAML 1.2 core "
    "schema, so 1_000 is a string and 0o17 is the int 15; Hydra (YAML 1.1) reads 1000 and the string '0o17'",
    "sweep_range_float_decimal": "docs/config.md (Differences from Hydra): float range steps are counted in "
    "decimal, range(0.1,0.5,0.1) gives 0.1,0.2,0.3,0.4, not Hydra's 0.30000000000000004",
    "interp_env_legacy_resolver": "docs/config.md (Differences from Hydra): wavetrain keeps ${env:VAR,default} as "
    "another name for ${oc.env:...}; OmegaConf 2.3 removed the env resolver",
    "force_add_group": "docs/config.md (Differences from Hydra): ++group=option changes the group's choice, or "
    "appends the group when it is not in the defaults list; Hydra 1.3 rejects force-add of config groups",
    "interp_to_missing": "docs/config.md (Differences from Hydra): a ??? value fails only when read, so "
    "--cfg job --resolve keeps ${a} -> ??? as written; OmegaConf's to_container(resolve=True) raises "
    "InterpolationToMissingValueError",
    "delete_null_key": "docs/config.md (Differences from Hydra): ~key deletes a key whose value is null (or ???); "
    "Hydra reads such a key as absent (OmegaConf.select gives None) and fails with 'does not exist'",
}

CASE_TIMEOUT_S = 30


# ---------------------------------------------------------------------------------------------
# Reading wavetrain's YAML: the YAML 1.2 core schema (yaml_io.cpp's plain_kind), not PyYAML's 1.1.

class Core12Loader(yaml.SafeLoader):
    pass


Core12Loader.yaml_implicit_resolvers = {}
for _tag, _regex, _first in [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float",
     r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
     list("-+.0123456789")),
]:
    Core12Loader.add_implicit_resolver(_tag, re.compile(_regex), _first)


def _construct_int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith("0x"):
        return int(text[2:], 16)
    if text.startswith("0o"):
        return int(text[2:], 8)
    return int(text, 10)


def _construct_float(loader, node):
    text = loader.construct_scalar(node)
    low = text.lower()
    if low in (".nan",):
        return math.nan
    if low.lstrip("+-") == ".inf":
        return -math.inf if text.startswith("-") else math.inf
    return float(text)


def _construct_bool(loader, node):
    return loader.construct_scalar(node).lower() == "true"


Core12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
Core12Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
Core12Loader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)


def load_wavetrain_yaml(text):
    return yaml.load(text, Loader=Core12Loader)


# ---------------------------------------------------------------------------------------------
# Exact comparison.

def _fmt(v):
    return f"{v!r} ({type(v).__name__})"


def tree_diff(a, b, path="", limit=6):
    """Differences between `a` (Hydra) and `b` (wavetrain), as strings; [] when equal."""
    out = []

    def walk(x, y, p):
        if len(out) >= limit:
            return
        where = p or "<root>"
        if type(x) is not type(y):
            out.append(f"{where}: hydra {_fmt(x)} != wavetrain {_fmt(y)}")
            return
        if isinstance(x, dict):
            kx, ky = list(x), list(y)
            only_x = [k for k in kx if k not in y]
            only_y = [k for k in ky if k not in x]
            if only_x:
                out.append(f"{where}: keys only in hydra: {only_x}")
            if only_y:
                out.append(f"{where}: keys only in wavetrain: {only_y}")
            for k in kx:
                if k in y:
                    walk(x[k], y[k], f"{p}.{k}" if p else str(k))
            common_x = [k for k in kx if k in y]
            common_y = [k for k in ky if k in x]
            if not only_x and not only_y and common_x != common_y and len(out) < limit:
                out.append(f"{where}: key order hydra {kx} != wavetrain {ky}")
        elif isinstance(x, list):
            if len(x) != len(y):
                out.append(f"{where}: hydra list of {len(x)} {x!r} != wavetrain list of {len(y)} {y!r}")
                return
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{p}.{i}" if p else str(i))
        elif isinstance(x, float):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                out.append(f"{where}: hydra {_fmt(x)} != wavetrain {_fmt(y)}")
        elif x != y:
            out.append(f"{where}: hydra {_fmt(x)} != wavetrain {_fmt(y)}")

    walk(a, b, path)
    return out


# ---------------------------------------------------------------------------------------------
# Override texts of sweep jobs.

def split_job_line(line):
    """wavetrain's `--info jobs` prints one job a line, overrides separated by spaces. A value may
    itself hold spaces inside quotes or brackets (`s='a b'`, `l=[1, 2]`) or escaped (`a\\ b`)."""
    parts, cur, quote, depth, i = [], "", None, 0, 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cur += line[i:i + 2]
            i += 2
            continue
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        elif c == " " and depth == 0:
            if cur:
                parts.append(cur)
            cur = ""
            i += 1
            continue
        cur += c
        i += 1
    if cur:
        parts.append(cur)
    return parts


def _plain(v):
    """A parsed override value as plain Python (QuotedString and friends -> str)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, str):
        return str(v)
    return v


class OverrideReader:
    """Reads an override text the way Hydra does: (prefix, key, package, typed value)."""

    def __init__(self):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self.parser = OverridesParser.create()

    def meaning(self, text):
        try:
            o = self.parser.parse_override(text)
        except Exception as e:  # noqa: BLE001 - any parse failure is reported, not raised
            return ("unparsable by Hydra", text, type(e).__name__)
        prefix = "~" if o.is_delete() else "++" if o.is_force_add() else "+" if o.is_add() else ""
        value = None if o.is_delete() and o.value() is None else _plain(o.value())
        return (prefix, o.key_or_group, o.package, value)


def jobs_diff(hydra_jobs, wave_jobs, reader):
    hm = [[reader.meaning(t) for t in job] for job in hydra_jobs]
    wm = [[reader.meaning(t) for t in job] for job in wave_jobs]
    if len(hm) != len(wm):
        return [f"hydra has {len(hm)} jobs {hydra_jobs} != wavetrain {len(wm)} jobs {wave_jobs}"]
    out = []
    for i, (h, w, ht, wt) in enumerate(zip(hm, wm, hydra_jobs, wave_jobs)):
        if len(h) != len(w):
            out.append(f"job {i}: hydra {ht} != wavetrain {wt}")
            continue
        for hh, ww, htext, wtext in zip(h, w, ht, wt):
            if hh[:3] != ww[:3] or tree_diff(hh[3], ww[3], limit=1):
                out.append(f"job {i}: hydra {ht} != wavetrain {wt} (first difference: {htext!r} vs {wtext!r})")
                break
        if len(out) >= 4:
            break
    return out


# ---------------------------------------------------------------------------------------------
# Hydra.

def hydra_side(case_dir, case):
    """{'error': str} or {'config': ..., 'resolved': ... or {'error'}} or {'jobs': [[str]]}."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    overrides = list(case.get("overrides") or [])
    try:
        with initialize_config_dir(config_dir=os.path.abspath(case_dir), version_base="1.3"):
            if case.get("mode") == "jobs":
                parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
                parsed = parser.parse_overrides(overrides)
                batches = BasicSweeper.split_arguments(parsed, None)
                return {"jobs": [list(job) for batch in batches for job in batch]}
            cfg = compose(config_name=case.get("config_name", "config"), overrides=overrides)
            out = {"config": OmegaConf.to_container(cfg, resolve=False)}
            if case.get("resolve"):
                try:
                    out["resolved"] = OmegaConf.to_container(cfg, resolve=True)
                except Exception as e:  # noqa: BLE001
                    out["resolved"] = {"error": f"{type(e).__name__}: {first_line(str(e))}"}
            return out
    except Exception as e:  # noqa: BLE001 - Hydra's failure is the expected result of some cases
        return {"error": f"{type(e).__name__}: {first_line(str(e))}"}


def first_line(s):
    s = s.strip()
    return s.splitlines()[0] if s else s


# ---------------------------------------------------------------------------------------------
# wavetrain.

def run_wavetrain(binary, case_dir, case, extra, cwd):
    env = dict(os.environ)
    env["WAVETRAIN_CONFIG_DIR"] = os.path.abspath(case_dir)  # replaces the built-in configs/
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spares the binary its re-exec; no effect on configs
    env.pop("WAVETRAIN_DIFF_TEST_UNSET_VAR", None)
    cmd = [binary, "train", *extra, "--config-name", case.get("config_name", "config"),
           *list(case.get("overrides") or [])]
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"rc": None, "out": "", "err": f"timed out after {CASE_TIMEOUT_S} s"}
    except OSError as e:  # e.g. the binary is being relinked
        return {"rc": None, "out": "", "err": f"cannot run {binary}: {e}"}
    return {"rc": p.returncode, "out": p.stdout, "err": p.stderr}


def wavetrain_side(binary, case_dir, case, cwd):
    """The same shape as hydra_side(), plus 'crash' for a signal or a timeout."""
    if case.get("mode") == "jobs":
        r = run_wavetrain(binary, case_dir, case, ["--info", "jobs", "-m"], cwd)
        if r["rc"] != 0:
            return failure(r)
        return {"jobs": [split_job_line(l) for l in r["out"].splitlines() if l.strip()]}
    r = run_wavetrain(binary, case_dir, case, ["--cfg", "job"], cwd)
    if r["rc"] != 0:
        return failure(r)
    out = {"config": strip_metadata(parse_output(r["out"]))}
    if case.get("resolve"):
        rr = run_wavetrain(binary, case_dir, case, ["--cfg", "job", "--resolve"], cwd)
        out["resolved"] = failure(rr) if rr["rc"] != 0 else strip_metadata(parse_output(rr["out"]))
    return out


def failure(r):
    msg = first_line(r["err"]) or first_line(r["out"])
    if r["rc"] is None or r["rc"] < 0 or r["rc"] >= 128:
        return {"crash": f"exit {r['rc']}: {msg}"}
    return {"error": f"exit {r['rc']}: {msg}"}


def parse_output(text):
    try:
        v = load_wavetrain_yaml(text)
    except yaml.YAMLError as e:
        return {"__unparsable_output__": f"{e}; output: {text[:300]!r}"}
    return {} if v is None else v


def strip_metadata(tree):
    if isinstance(tree, dict):
        for k in WAVETRAIN_METADATA_KEYS:
            tree.pop(k, None)
    return tree


# ---------------------------------------------------------------------------------------------
# Judging one case.

def compare(hydra, wave, reader):
    """Differences between two results of hydra_side()/wavetrain_side() shape; [] when they agree."""
    if "crash" in wave:
        return [f"wavetrain crashed ({wave['crash']})"]
    if "error" in hydra or "error" in wave:
        if "error" in hydra and "error" in wave:
            return []
        if "error" in hydra:
            return [f"hydra fails ({hydra['error']}) but wavetrain succeeds: {short(wave)}"]
        return [f"wavetrain fails ({wave['error']}) but hydra succeeds: {short(hydra)}"]
    if "jobs" in hydra or "jobs" in wave:
        return jobs_diff(hydra.get("jobs", []), wave.get("jobs", []), reader)
    diffs = tree_diff(hydra["config"], wave["config"])
    if "resolved" in hydra or "resolved" in wave:
        rd = compare_resolved(hydra.get("resolved"), wave.get("resolved"))
        diffs += [f"resolved: {d}" for d in rd]
    return diffs


def compare_resolved(h, w):
    if isinstance(w, dict) and "crash" in w:
        return [f"wavetrain --resolve crashed ({w['crash']})"]
    he = isinstance(h, dict) and set(h) == {"error"}
    we = isinstance(w, dict) and set(w) == {"error"}
    if he and we:
        return []
    if he:
        return [f"hydra fails ({h['error']}) but wavetrain gives {short(w)}"]
    if we:
        return [f"wavetrain fails ({w['error']}) but hydra gives {short(h)}"]
    return tree_diff(h, w)


def short(result, n=160):
    s = repr(result.get("config", result.get("jobs", result)) if isinstance(result, dict) else result)
    return s if len(s) <= n else s[:n] + "..."


def expected_result(case):
    """wavetrain's documented result from case.yaml, in wavetrain_side()'s shape."""
    exp = case.get("wavetrain_expected") or {}
    if exp.get("error"):
        return {"error": "(documented)"}
    out = {}
    for k in ("config", "resolved", "jobs"):
        if k in exp:
            out[k] = exp[k]
    return out


def judge(name, case, hydra, wave, reader):
    """(status, detail): status is PASS, FAIL or DIFF-INTENDED."""
    if case.get("expect") == "error" and "error" not in hydra:
        return "FAIL", f"case expects an error, but Hydra composes: {short(hydra)}"
    if name in INTENDED_DIFFERENCES:
        reason = INTENDED_DIFFERENCES[name]
        exp = expected_result(case)
        if not exp:
            return "FAIL", "listed as an intended difference but case.yaml has no wavetrain_expected"
        if "crash" in wave:
            return "FAIL", f"wavetrain crashed ({wave['crash']})"
        mine = {k: v for k, v in wave.items() if k in exp or k == "error"}
        wd = compare(exp if "error" not in exp else {"error": ""}, mine, reader)
        wd = [d.replace("hydra", "documented") for d in wd]
        if wd:
            return "FAIL", "wavetrain does not give its documented result: " + "; ".join(wd)
        if not compare(hydra, wave, reader):
            return "PASS", f"(listed as an intended difference, but Hydra now agrees: {reason})"
        return "DIFF-INTENDED", reason
    diffs = compare(hydra, wave, reader)
    if diffs:
        return "FAIL", "; ".join(diffs)
    return "PASS", ""


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary", help="the wavetrain binary")
    ap.add_argument("cases_dir", help="tests/data/hydra_cases")
    ap.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print both sides of every failing case")
    ap.add_argument("--jobs", "-j", type=int, default=4, help="wavetrain processes at a time")
    args = ap.parse_args(argv)

    if not (os.path.isfile(args.binary) and os.access(args.binary, os.X_OK)):
        print(f"error: {args.binary} is not an executable file", file=sys.stderr)
        return 2
    binary = os.path.abspath(args.binary)  # wavetrain runs in a scratch working directory
    names = sorted(n for n in os.listdir(args.cases_dir)
                   if os.path.isfile(os.path.join(args.cases_dir, n, "case.yaml")))
    if args.case:
        unknown = [n for n in args.case if n not in names]
        if unknown:
            print(f"error: no such case: {', '.join(unknown)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in args.case]
    stale = [n for n in INTENDED_DIFFERENCES if n not in names and not args.case]
    cases = {}
    for n in names:
        with open(os.path.join(args.cases_dir, n, "case.yaml")) as f:
            cases[n] = yaml.safe_load(f) or {}

    # Hydra, in this process, one case after another (GlobalHydra is process-wide state).
    logging.getLogger("hydra").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    hydra = {n: hydra_side(os.path.join(args.cases_dir, n), cases[n]) for n in names}

    # wavetrain, a few processes at a time, in an empty working directory.
    with tempfile.TemporaryDirectory(prefix="hydra_diff_") as cwd:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = {n: pool.submit(wavetrain_side, binary, os.path.join(args.cases_dir, n), cases[n], cwd)
                       for n in names}
            wave = {n: f.result() for n, f in futures.items()}

    reader = OverrideReader()
    counts = {"PASS": 0, "FAIL": 0, "DIFF-INTENDED": 0}
    for n in names:
        status, detail = judge(n, cases[n], hydra[n], wave[n], reader)
        counts[status] += 1
        print(f"{status} {n}" + (f": {detail}" if detail else ""))
        if args.verbose and status == "FAIL":
            print(f"    hydra:     {hydra[n]!r}")
            print(f"    wavetrain: {wave[n]!r}")
    for n in stale:
        counts["FAIL"] += 1
        print(f"FAIL {n}: listed in INTENDED_DIFFERENCES but there is no such case")
    print(f"{len(names)} cases: {counts['PASS']} passed, {counts['FAIL']} failed, "
          f"{counts['DIFF-INTENDED']} intended differences")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
