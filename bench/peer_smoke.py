#!/usr/bin/python3
"""Runs every peer script of bench/ for a few steps on tiny inputs and checks
that each prints its figure: the peers carry bench/README.md's claims, and
nothing else runs them, so an interface change breaks them unnoticed
(peer_ddp.py did). No timing is asserted. ctest runs this as
PeerScripts.RunAndPrintTheirFigures (label "peers"), through peer_smoke.sh:

    /usr/bin/python3 bench/peer_smoke.py [DLSCALE_BINARY]

Each script runs as `python3 SCRIPT ARGS` runs it (as __main__, with its
argv), in a fork of this process, which imported torch and torchvision once
before: an import is about 3 s of CPU, which each of the 15 scripts paid.
The workers a script spawns still import them.
"""
import os
import re
import runpy
import signal
import sys
import tempfile
import time
import traceback

import torch  # noqa: F401  (imported once, before the forks)
import torchvision  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 300  # a script's limit; then its process group is stopped
NUMBER = r"[0-9]+(\.[0-9]+)?"


def checks(dlscale, tmp):
    """(name, pattern its output must match, script, arguments)."""
    train = "peer_train.py"
    return [
        ("peer_train_lenet", rf'"samples_per_sec": {NUMBER}', train,
         "--model lenet --batch 4 --steps 3 --warmup 1 --threads 1"),
        ("peer_train_transformer", rf'"items_per_sec": {NUMBER}', train,
         "--model transformer --vocab 64 --seq-len 8 --batch 2 --steps 2 --warmup 1 --threads 1"),
        ("peer_train_ncf", rf'"samples_per_sec": {NUMBER}', train,
         "--model ncf --batch 64 --steps 2 --warmup 1 --threads 1"),
        # maskrcnn: images with objects drawn in, and the positive RoIs it counts
        ("peer_train_maskrcnn", r'"positive_rois_per_image": [1-9]', train,
         "--model maskrcnn --image-size 64 --rois 16 --classes 5 --batch 1 --steps 2 --warmup 1 "
         "--threads 1 --lr 1e-30 --optimizer momentum"),
        ("peer_ddp", rf'"samples_per_sec": {NUMBER}', "peer_ddp.py",
         "--model lenet --batch 4 --workers 2 --steps 3 --warmup 1"),
        ("peer_ddp_zero", r'"optimizer_state_bytes_max": [1-9]', "peer_ddp.py",
         "--model lenet --batch 4 --workers 2 --steps 3 --warmup 1 --zero --optimizer adam"),
        ("peer_allreduce_torch", rf'"busbw_gbps": {NUMBER}', "peer_allreduce_torch.py",
         "--workers 2 --sizes 4096 --warmup 1 --iters 2"),
        ("commbench_peers", rf"^ +4096 +{NUMBER}", "commbench_peers.py",
         f"--dlscale {dlscale} --workers 2 --sizes 4096 --warmup 1 --iters 2 --repeats 1"),
        ("data_loader_fashion_mnist", rf"^samples/s: {NUMBER}", "data_loader_peer.py",
         "--data fashion-mnist --batch 32 --workers 0 --steps 3 --warmup 1"),
        ("make_image_folder", r"^wrote 16 ", "make_image_folder.py", f"{tmp}/jpeg --images 16 --size 48"),
        ("data_loader_folder", rf"^samples/s: {NUMBER}", "data_loader_peer.py",
         f"--data folder:{tmp}/jpeg --batch 4 --workers 0 --steps 2 --warmup 1 --image-size 32"),
        ("torchvision_reference", r'"parameters": [1-9]', "torchvision_reference.py",
         "--image-size 32 --models lenet,resnet18,ncf"),
        ("run_peer_bench", rf"^lenet +8 +28 .* {NUMBER}$", "run_peer_bench.py",
         f"--dlscale {dlscale} --case lenet:8:28 --runs 3 --threads 1 --steps 3 --warmup 1"),
        ("scaling", r"^lenet +8 weak .*%$", "scaling.py",
         f"--dlscale {dlscale} --case lenet:8:28 --workers 2 --threads 1 --runs 1 --steps 3 --warmup 1"),
        ("tta_peer", rf"^time to accuracy: {NUMBER} s", "tta_peer.py",
         "--epochs 1 --target 0.5 --threads 2 --batch 64 --train-samples 4096 --test-samples 1024"),
    ]


def script_main(script, args, out_path):
    """In the fork: runs SCRIPT as __main__ with ARGS, its output into
    OUT_PATH, and ends with its exit code."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own group: a timeout stops its children too
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        sys.argv = [script] + args
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:  # sys.exit("message"): printed, exit 1
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: B036 (what python3 SCRIPT would print)
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run(script, args, out_path):
    """SCRIPT's exit code, or None if it ran past TIMEOUT_S (then stopped)."""
    pid = os.fork()
    if pid == 0:
        script_main(script, args, out_path)
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    stop(pid)
    return None


def stop(pid):
    """Stops PID's process group (SIGTERM, 10 s of grace, SIGKILL) and reaps PID."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if os.waitpid(pid, os.WNOHANG)[0] != 0:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def main():
    os.chdir(os.path.dirname(HERE))
    dlscale = sys.argv[1] if len(sys.argv) > 1 else "build/dlscale"
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, pattern, script, args in checks(dlscale, tmp):
            out_path = os.path.join(tmp, name + ".out")
            start = time.monotonic()
            code = run(os.path.join(HERE, script), args.split(), out_path)
            with open(out_path, errors="replace") as f:
                out = f.read()
            if code == 0 and re.search(pattern, out, re.MULTILINE):
                print(f"PASS {name} ({time.monotonic() - start:.0f} s)", flush=True)
                passed += 1
            else:
                why = "timed out" if code is None else f"exit {code}"
                print(f"FAIL {name} ({why}): bench/{script} {args}", flush=True)
                for line in out.splitlines()[-5:]:
                    print("    " + line, flush=True)
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
