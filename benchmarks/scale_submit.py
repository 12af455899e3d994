"""Job submission: the Run:ai scale-test way vs ours, side by side in one run (not part of the test run).

    python benchmarks/scale_submit.py [--jobs 1000] [--parallelism 16] [--nodes 1000] [--repeat 1]

One simulator (SimCluster, --nodes a100 GPU nodes) serves both ways; each submits the same --jobs training Jobs
(batch/v1, one GPU, sleep infinity, built by pytest_topsail.scale.workloads) into its own namespace, then the namespace
is deleted before the next way runs.
- Run:ai way: a process pool of --parallelism processes; each job is a YAML document filled from a template and
  piped into its own `kubectl apply -f -` subprocess (60 s timeout), as the Run:ai tool's submitter does.
- ours: pytest_topsail.scale.submitter.Submitter, --parallelism threads sharing one official-client connection pool,
  no client-side rate limit.
Figure: seconds from the first submission to the last answer, jobs/s, and the ratio (goal: ours >= 40x faster).
Medians of --repeat runs (the two ways alternate).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

from pytest_topsail.kube.client import Kube, connect
from pytest_topsail.kube.namespaces import create_namespace, delete_namespaces
from pytest_topsail.scale.submitter import JobToSubmit, Pacing, Submitter
from pytest_topsail.scale.workloads import RUN_LABEL, WorkloadSpec, job_name, job_objects
from pytest_topsail.sim.run.launcher import SimCluster

KUBECTL_TIMEOUT_S = 60


def manifests(jobs: int, namespace: str, run_id: str) -> list[dict[str, Any]]:
    spec = WorkloadSpec(workload="training", gpus=1)
    return [job_objects(spec, job_name(f"j-{run_id}", i), namespace, run_id, i)[-1] for i in range(jobs)]


def kubectl_apply(args: tuple[str, str, str]) -> tuple[float, float, int]:
    """One job the Run:ai way: fill the template, `kubectl apply -f -`. Returns (start, end, return code)."""
    kubectl, kubeconfig, document = args
    start = time.time()
    completed = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-"], input=document,
                               capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_S)
    return start, time.time(), completed.returncode


def submit_runai_way(kubectl: str, kubeconfig: str, objects: list[dict[str, Any]], parallelism: int) -> dict:
    documents = [(kubectl, kubeconfig, yaml.safe_dump(obj)) for obj in objects]
    with multiprocessing.get_context("fork").Pool(processes=parallelism) as pool:
        results = pool.map(kubectl_apply, documents, chunksize=1)
    failed = sum(1 for _, _, code in results if code != 0)
    span = max(end for _, end, _ in results) - min(start for start, _, _ in results)
    return {"seconds": span, "failed": failed}


def submit_our_way(api: Kube, objects: list[dict[str, Any]], parallelism: int) -> dict:
    jobs = [JobToSubmit(index=i, name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"], objects=[obj])
            for i, obj in enumerate(objects)]
    result = Submitter(api, Pacing(mode="qps", qps=0, parallelism=parallelism), progress_stream=None).submit(jobs)
    span = (max(r.response_ms for r in result.records) - min(r.submit_ms for r in result.records)) / 1000.0
    return {"seconds": span, "failed": result.failed}


def run_way(way: str, api: Kube, kubectl: str, kubeconfig: str, args: argparse.Namespace, round_: int) -> dict:
    run_id = f"{way}{round_}"
    namespace = f"bench-{run_id}"
    create_namespace(api, namespace, {RUN_LABEL: run_id})
    objects = manifests(args.jobs, namespace, run_id)
    try:
        if way == "runai":
            figure = submit_runai_way(kubectl, kubeconfig, objects, args.parallelism)
        else:
            figure = submit_our_way(api, objects, args.parallelism)
    finally:
        delete_namespaces(api, [namespace], timeout=120)
    figure["jobs_per_s"] = args.jobs / figure["seconds"] if figure["seconds"] > 0 else float("inf")
    print(f"  round {round_} {way:5s}: {args.jobs} jobs in {figure['seconds']:.2f} s "
          f"({figure['jobs_per_s']:.1f} jobs/s, {figure['failed']} failed)", flush=True)
    return figure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--kubectl", default="kubectl")
    args = parser.parse_args()
    kubectl = shutil.which(args.kubectl)
    if kubectl is None:
        print(f"{args.kubectl}: not found on PATH (the Run:ai way needs kubectl)", file=sys.stderr)
        return 2
    figures: dict[str, list[dict]] = {"runai": [], "ours": []}
    with tempfile.TemporaryDirectory() as workdir, SimCluster(nodes=args.nodes, gpu_profile="a100", seed=1,
                                                              preinstalled="all", workdir=workdir) as sim:
        kubeconfig = str(sim.kubeconfig_path)
        api = connect(kubeconfig, pool_size=args.parallelism + 4)
        print(f"simulator: {args.nodes} nodes; {args.jobs} jobs per way, parallelism {args.parallelism}, "
              f"{args.repeat} round(s); kubectl {kubectl}", flush=True)
        for round_ in range(args.repeat):
            order = ("runai", "ours") if round_ % 2 == 0 else ("ours", "runai")
            for way in order:
                figures[way].append(run_way(way, api, kubectl, kubeconfig, args, round_))
        api.close()
    medians = {way: statistics.median(f["seconds"] for f in runs) for way, runs in figures.items()}
    ratio = medians["runai"] / medians["ours"]
    print(json.dumps({"jobs": args.jobs, "parallelism": args.parallelism, "nodes": args.nodes,
                      "runai_s": round(medians["runai"], 3), "ours_s": round(medians["ours"], 3),
                      "runai_jobs_per_s": round(args.jobs / medians["runai"], 1),
                      "ours_jobs_per_s": round(args.jobs / medians["ours"], 1), "ratio": round(ratio, 1),
                      "ratio_per_round": [round(r["seconds"] / o["seconds"], 1)
                                          for r, o in zip(figures["runai"], figures["ours"], strict=True)]}))
    print(f"ours is {ratio:.1f}x faster than kubectl apply per job (goal >= 40x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
