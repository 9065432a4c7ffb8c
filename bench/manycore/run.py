#!/usr/bin/env python3
# attnkit bench: the cases of bench/manycore/prepare.mjs on attnkit's CLI and on ORT's Python package, side by
# side at 1 to 16 threads, for a machine with more cores than this project's 2-core host (and no Node). Also checks
# what must hold at any thread count: attnkit's outputs are the same bits at every one, and near ORT's.
# Usage: run.py CASES_DIR CLI [--threads 1,2,4,8,16] [--iters N] [--json OUT] (without onnxruntime: attnkit alone).
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import onnxruntime as ort
except ImportError:
    ort = None

DTYPES = {'float32': np.float32, 'float16': np.float16, 'int8': np.int8, 'uint8': np.uint8, 'int32': np.int32,
          'int64': np.int64}
MASK64 = (1 << 64) - 1


def splitmix_upper(seed, count):
    """DESIGN.md's splitmix64 stream: the upper 32 bits of its first `count` outputs."""
    with np.errstate(over='ignore'):
        state = np.uint64(seed & MASK64) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (state ^ (state >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z >> np.uint64(32)


def materialize(t):
    dtype, shape = DTYPES[t['dtype']], t['shape']
    count = int(np.prod(shape)) if shape else 1
    if 'data' in t:
        return np.array(t['data'], dtype=np.float64).astype(dtype).reshape(shape)
    if 'base64' in t:
        return np.frombuffer(base64.b64decode(t['base64']), dtype=dtype).reshape(shape).copy()
    spec, u = t['random'], splitmix_upper(t['random']['seed'], count)
    if np.issubdtype(dtype, np.floating):
        low, high = spec.get('low', -1.0), spec.get('high', 1.0)
        values = low + (high - low) * ((u >> np.uint64(8)).astype(np.float64) / 16777216.0)
    else:
        info = np.iinfo(dtype)
        low, high = spec.get('low', int(info.min)), spec.get('high', int(info.max))
        values = low + (u % np.uint64(high - low + 1)).astype(np.int64)
    return values.astype(dtype).reshape(shape)


def median(xs):
    return sorted(xs)[len(xs) // 2]


def time_ort(model_path, case_path, threads_list, warmup, iters, budget_s=3.0):
    """ORT at each thread count, in a child process: the pool threads of a session spin on after it is deleted
    (with 16 threads on 16 cores, attnkit's runs right after one took up to 10x as long); they end with the child.
    Returns {threads: {'own_ms', 'run_ms'}} and the first thread count's outputs."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, __file__, '--ort-child', model_path, case_path, tmp,
                               ','.join(map(str, threads_list)), str(warmup), str(iters), str(budget_s)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'ORT child failed')
        times = {int(k): v for k, v in json.loads(done.stdout).items()}
        outputs = {f[:-4]: np.load(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.endswith('.npy')}
    return times, outputs


def ort_child(model_path, case_path, out_dir, threads_list, warmup, iters, budget_s):
    """Times session.run and, from ORT's profiler, its own run (model_run): session.run also turns the outputs
    into numpy arrays, which attnkit's C++ timing does not pay (in Node that took 1.3-3.4x ORT's own run of a T=4096
    decode step)."""
    with open(case_path) as f:
        feeds = {name: materialize(t) for name, t in json.load(f)['inputs'].items()}
    times = {}
    for threads in [int(t) for t in threads_list.split(',')]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(out_dir, f'profile-{threads}')
        session = ort.InferenceSession(model_path, options, providers=['CPUExecutionProvider'])
        for _ in range(int(warmup)):
            outputs = session.run(None, feeds)
        runs, spent = [], 0.0
        while len(runs) < int(iters) and spent < float(budget_s):
            t0 = time.perf_counter()
            outputs = session.run(None, feeds)
            runs.append((time.perf_counter() - t0) * 1e3)
            spent += runs[-1] / 1e3
        profile = session.end_profiling()
        with open(profile) as f:
            own = [e['dur'] / 1e3 for e in json.load(f) if e.get('cat') == 'Session' and e.get('name') == 'model_run']
        os.remove(profile)
        own = own[int(warmup):int(warmup) + len(runs)]
        if len(own) != len(runs):
            raise RuntimeError(f"ORT's profile holds {len(own)} timed runs, not {len(runs)}")
        times[threads] = {'own_ms': median(own), 'run_ms': median(runs)}
        if len(times) == 1:
            for o, data in zip(session.get_outputs(), outputs):
                np.save(os.path.join(out_dir, o.name + '.npy'), data)
    print(json.dumps(times))


def attnkit(cli, case_path, *args):
    done = subprocess.run([cli, *args[:1], case_path, *args[1:]], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip())
    return done.stdout


def attnkit_outputs(cli, case_path, threads):
    with tempfile.NamedTemporaryFile(suffix='.json') as out:
        attnkit(cli, case_path, 'run', '--threads', str(threads), '--out', out.name)
        with open(out.name) as f:
            result = json.load(f)['outputs']
    return {name: materialize(t) for name, t in result.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('cases')
    parser.add_argument('cli')
    parser.add_argument('--threads', default='1,2,4,8,16')
    parser.add_argument('--iters', type=int, default=10)
    parser.add_argument('--json')
    args = parser.parse_args()
    threads_list = [int(t) for t in args.threads.split(',')]
    with open(os.path.join(args.cases, 'list.json')) as f:
        cases = json.load(f)
    rows, problems = [], []
    for entry in cases:
        sys.stderr.write(f'{entry["name"]}\n')
        case_path = os.path.join(args.cases, entry['id'] + '.json')
        warmup, iters = (20, 3 * args.iters) if entry['kind'] == 'decode' else (3, args.iters)
        # Bits at every thread count, against the first count's.
        first = attnkit_outputs(args.cli, case_path, threads_list[0])
        for threads in threads_list[1:]:
            other = attnkit_outputs(args.cli, case_path, threads)
            for name, data in first.items():
                if other[name].tobytes() != data.tobytes():
                    problems.append(f'{entry["name"]}: {name} at {threads} threads differs from {threads_list[0]}')
        ort_ms, ort_diff = {}, None
        if ort is not None:
            try:
                ort_ms, ort_out = time_ort(os.path.join(args.cases, entry['id'] + '.onnx'), case_path, threads_list,
                                           warmup, iters)
                ort_diff = float(np.max(np.abs(ort_out['output'].astype(np.float64)
                                               - first['output'].astype(np.float64))))
            except Exception as err:  # noqa: BLE001 -- ORT's refusal is a finding, not the end of the run
                problems.append(f'{entry["name"]}: ORT: {err}')
        for threads in threads_list:
            bench = json.loads(attnkit(args.cli, case_path, 'bench', '--threads', str(threads), '--iters', str(iters),
                                       '--warmup', str(warmup)))
            ort_times = ort_ms.get(threads, {})
            rows.append({'case': entry['name'], 'threads': threads, 'attnkit_ms': bench['median_us'] / 1e3,
                         'ort_ms': ort_times.get('own_ms'), 'ort_session_run_ms': ort_times.get('run_ms'),
                         'isa': bench['isa'], 'output_max_abs_diff_vs_ort': ort_diff})
    print("ORT ms: ORT's own run (its profiler); session.run: from Python, the outputs' conversion included")
    print(f'{"case":42}{"thr":>4}{"attnkit ms":>12}{"ORT ms":>10}{"ORT/attnkit":>13}{"x 1 thread":>12}'
          f'{"session.run":>13}')
    one = {r['case']: r['attnkit_ms'] for r in rows if r['threads'] == threads_list[0]}
    for r in rows:
        ratio = f'{r["ort_ms"] / r["attnkit_ms"]:.2f}x' if r['ort_ms'] else '-'
        ort_ms = f'{r["ort_ms"]:.3f}' if r['ort_ms'] else '-'
        run_ratio = f'{r["ort_session_run_ms"] / r["attnkit_ms"]:.2f}x' if r['ort_session_run_ms'] else '-'
        print(f'{r["case"]:42}{r["threads"]:4}{r["attnkit_ms"]:12.3f}{ort_ms:>10}{ratio:>13}'
              f'{one[r["case"]] / r["attnkit_ms"]:11.2f}x{run_ratio:>13}')
    for r in rows:
        if r['threads'] == threads_list[0] and r['output_max_abs_diff_vs_ort'] is not None:
            print(f'{r["case"]}: max |attnkit - ORT| output {r["output_max_abs_diff_vs_ort"]:.2e}')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'rows': rows, 'problems': problems}, f, indent=1)
    for p in problems:
        print('PROBLEM:', p)
    print(f'{len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    if sys.argv[1:2] == ['--ort-child']:
        ort_child(*sys.argv[2:])
    else:
        sys.exit(main())
