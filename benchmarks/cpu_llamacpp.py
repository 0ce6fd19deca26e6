#!/usr/bin/env python3
"""The CPU runtime against llama.cpp (llama-cpp-python) in the same run: the
same GGUF, the same threads, the same token ids, phase by phase, the two
interleaved rep by rep, medians; optionally fact encoding before and after
(two builds of tools/inferscale, interleaved as well).

  benchmarks/llamacpp_setup.sh          # once: .venv-bench with llama-cpp-python
  .venv-bench/bin/python benchmarks/cpu_llamacpp.py --build build \\
      [--before-build DIR --facts ../shared/data/locomo/conv-26.json] [--reps 9] [--threads 2]

Writes benchmarks/results/cpu-llamacpp.json: rows {phase, tokens, threads,
ours_ms, llamacpp_ms, ratio} (ratio = ours / llama.cpp; below 1: we are
faster), the CPU times beside them, the hardware and the machine's load;
ours_int8_ms and ratio_int8: the runtime with infs_model_options.int8_activations
(8-bit activations in the products of few tokens, as llama.cpp computes them)."""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("INFS_CACHE", os.path.expanduser("~/.cache/inferscale"))
MODEL = os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return [x for x in ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni") if x in flags]
    return []


class Ours:
    def __init__(self, build, model, threads, int8=False):
        exe = os.path.join(build, "benchmarks", "bench_cpu_phases")
        self.p = subprocess.Popen([exe, model, str(threads)] + (["int8"] if int8 else []), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=ours_env())

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().split()

    def tokens(self, ids):
        assert self.ask("tokens " + " ".join(map(str, ids)) + " end")[0] == "ok"

    def phase(self, phase, prompt, n):
        cmd = {"full": f"full {n}", "question": f"question {prompt} {n}", "decode": f"decode {prompt} {n}"}[phase]
        ms, cpu = map(float, self.ask(cmd))
        return ms, cpu

    def close(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        self.p.wait()


class LlamaCpp:
    def __init__(self, model, threads):
        import llama_cpp
        self.version = llama_cpp.__version__
        self.llm = llama_cpp.Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_ctx=1024,
                                   n_batch=1024, n_ubatch=1024, verbose=False)

    def phase(self, phase, prompt, n, ids):
        llm = self.llm
        llm.reset()
        if phase == "full":
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            llm.eval(ids[:n])
            return (time.perf_counter() - t0) * 1e3, (time.process_time() - cpu0) * 1e3
        llm.eval(ids[:prompt])
        if phase == "question":
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            llm.eval(ids[prompt:prompt + n])
            return (time.perf_counter() - t0) * 1e3, (time.process_time() - cpu0) * 1e3
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        for i in range(n):
            llm.eval([ids[prompt + i]])
        return (time.perf_counter() - t0) * 1e3 / n, (time.process_time() - cpu0) * 1e3 / n


def locomo_facts(path):
    """A LoCoMo conversation's observations as FACTS.jsonl for `inferscale encode`."""
    with open(path) as f:
        conv = json.load(f)
    out = os.path.join(tempfile.mkdtemp(), "facts.jsonl")
    name = os.path.splitext(os.path.basename(path))[0]
    with open(out, "w") as f:
        for key, obs in conv.items():
            if key.endswith("_observation"):
                for speaker, items in obs.items():
                    for item in items:
                        f.write(json.dumps({"text": item[0], "namespace": name, "speaker": speaker}) + "\n")
    return out


def ours_env():
    """OpenBLAS's own threads (the runtime's attention products use it) spin
    while the runtime's pool works: one OpenBLAS thread, as docs/model-runtime.md
    advises on a small machine."""
    return dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))


def encode_rate(exe, facts, threads, env=None):
    """Facts per second (wall and per CPU-second) of `inferscale encode`."""
    n = sum(1 for line in open(facts) if line.strip())
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        r0 = os.times()
        subprocess.run([exe, "encode", facts, "--store", os.path.join(d, "s.infs"), "--threads", str(threads),
                        "--quiet"], check=True, stdout=subprocess.DEVNULL, env=env)
        r1 = os.times()
        wall = time.perf_counter() - t0
    cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    return n / wall, n / cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--prompt", type=int, default=200)
    ap.add_argument("--questions", default="12,24,35")
    ap.add_argument("--decode-steps", type=int, default=16)
    ap.add_argument("--before-build", help="a build of the runtime before the change, for encode facts/s")
    ap.add_argument("--facts", help="FACTS.jsonl, or a LoCoMo conversation (.json: its observations), for "
                                    "encode facts/s before and after")
    ap.add_argument("--encode-reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "cpu-llamacpp.json"))
    ap.add_argument("--only", choices=["phases", "encode"],
                    help="run one part and keep the other part of an existing --out file")
    a = ap.parse_args()
    out = {}
    if a.only and os.path.exists(a.out):
        with open(a.out) as f:
            out = json.load(f)
    out["hardware"] = {"cpu": cpu_name(), "cores": os.cpu_count(), "flags": cpu_flags()}
    out["model"] = os.path.basename(a.model)
    if a.only != "encode":
        phases_part(a, out)
    if a.only != "phases" and a.before_build and a.facts:
        encode_part(a, out)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(a.out)


def phases_part(a, out):
    llama = LlamaCpp(a.model, a.threads)
    ours = Ours(a.build, a.model, a.threads)
    int8 = Ours(a.build, a.model, a.threads, int8=True)
    qs = [int(x) for x in a.questions.split(",")]
    # The same ids for both: llama.cpp's tokenizer over a LoCoMo-like text,
    # repeated to length.
    text = ("Caroline went to the LGBTQ support group yesterday and told Melanie how the transgender stories "
            "inspired her to keep going with her plans to study counseling and adopt children. ")
    ids = llama.llm.tokenize(text.encode(), add_bos=False)
    need = a.prompt + max(qs + [a.decode_steps]) + 1
    ids = (ids * (need // len(ids) + 1))[:need]
    ours.tokens(ids)
    int8.tokens(ids)

    phases = [("full", 0, a.prompt)] + [("question", a.prompt, q) for q in qs] + [("decode", a.prompt, a.decode_steps)]
    # One untimed run of each first (caches, page faults).
    for ph, p, n in phases:
        ours.phase(ph, p, n)
        int8.phase(ph, p, n)
        llama.phase(ph, p, n, ids)
    samples = {ph + str(n): {"ours": [], "ours_cpu": [], "int8": [], "int8_cpu": [], "llama": [], "llama_cpu": []}
               for ph, p, n in phases}
    loads = [os.getloadavg()[0]]
    for rep in range(a.reps):
        for ph, p, n in phases:
            s = samples[ph + str(n)]
            # Alternate which goes first, so neither always follows the other.
            order = [0, 2, 1] if rep % 2 == 0 else [1, 2, 0]
            for who in order:
                if who == 0:
                    ms, cpu = ours.phase(ph, p, n)
                    s["ours"].append(ms)
                    s["ours_cpu"].append(cpu)
                elif who == 2:
                    ms, cpu = int8.phase(ph, p, n)
                    s["int8"].append(ms)
                    s["int8_cpu"].append(cpu)
                else:
                    ms, cpu = llama.phase(ph, p, n, ids)
                    s["llama"].append(ms)
                    s["llama_cpu"].append(cpu)
        loads.append(os.getloadavg()[0])
        print(f"rep {rep + 1}/{a.reps} done, load average {loads[-1]:.2f}", file=sys.stderr)
    ours.close()
    int8.close()

    rows = []
    for ph, p, n in phases:
        s = samples[ph + str(n)]
        om, lm = statistics.median(s["ours"]), statistics.median(s["llama"])
        oc, lc = statistics.median(s["ours_cpu"]), statistics.median(s["llama_cpu"])
        im, ic = statistics.median(s["int8"]), statistics.median(s["int8_cpu"])
        rows.append({"phase": ph, "tokens": n, "cached": p, "threads": a.threads, "ours_ms": round(om, 2),
                     "llamacpp_ms": round(lm, 2), "ratio": round(om / lm, 3), "ours_cpu_ms": round(oc, 2),
                     "llamacpp_cpu_ms": round(lc, 2), "cpu_ratio": round(oc / lc, 3),
                     "ours_int8_ms": round(im, 2), "ratio_int8": round(im / lm, 3),
                     "ours_int8_cpu_ms": round(ic, 2), "cpu_ratio_int8": round(ic / lc, 3)})
        print(f"{ph:9s} {n:4d} tokens over {p:3d}: ours {om:9.2f} ms, llama.cpp {lm:9.2f} ms, ratio {om / lm:.2f} "
              f"(CPU {oc:.1f} vs {lc:.1f} ms, {oc / lc:.2f}); int8 {im:.2f} ms, ratio {im / lm:.2f} "
              f"(CPU {ic:.1f}, {ic / lc:.2f})", file=sys.stderr)
    out.update({
        "llama_cpp_python": llama.version,
        "reps": a.reps, "statistic": "median", "interleaved": True,
        "phases_time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "load_average_during_phases": {"min": min(loads), "max": max(loads),
                                       "mean": round(statistics.mean(loads), 2)},
        "ms_note": "wall ms per phase (decode: per token); *_cpu_ms: the process's CPU time, all threads; "
                   "ours_int8_*: infs_model_options.int8_activations = 1",
        "ours_env": {"OPENBLAS_NUM_THREADS": ours_env()["OPENBLAS_NUM_THREADS"]},
        "rows": rows,
    })


def encode_part(a, out):
    loads = [os.getloadavg()[0]]
    facts = locomo_facts(a.facts) if a.facts.endswith(".json") else a.facts
    n = sum(1 for line in open(facts) if line.strip())
    before, after = [], []
    for rep in range(a.encode_reps):
        for which in ([0, 1] if rep % 2 == 0 else [1, 0]):
            build = a.before_build if which == 0 else a.build
            # Before: every product through OpenBLAS, its threads as they
            # come (its best); after: ours_env().
            (before if which == 0 else after).append(encode_rate(os.path.join(build, "tools", "inferscale"),
                                                                 facts, a.threads,
                                                                 None if which == 0 else ours_env()))
        loads.append(os.getloadavg()[0])
    bw, bc = statistics.median(x[0] for x in before), statistics.median(x[1] for x in before)
    aw, ac = statistics.median(x[0] for x in after), statistics.median(x[1] for x in after)
    out["encode"] = {"facts": n, "source": os.path.basename(a.facts) + " (session observations)", "threads": a.threads, "reps": a.encode_reps,
                     "before_facts_per_s": round(bw, 2), "after_facts_per_s": round(aw, 2),
                     "speedup": round(aw / bw, 2), "before_facts_per_cpu_s": round(bc, 2),
                     "after_facts_per_cpu_s": round(ac, 2), "cpu_speedup": round(ac / bc, 2)}
    out["encode"]["time_utc"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    out["encode"]["load_average_during"] = {"min": min(loads), "max": max(loads),
                                            "mean": round(statistics.mean(loads), 2)}
    print(f"encode: {bw:.2f} -> {aw:.2f} facts/s ({aw / bw:.2f}x); per CPU-second {bc:.2f} -> {ac:.2f} "
          f"({ac / bc:.2f}x)", file=sys.stderr)


if __name__ == "__main__":
    main()
