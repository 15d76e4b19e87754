"""The TLS study's model line (scripts/study-tls.sh): `sonda model --run-queues` of one
run's trace, solved by LINE's simulator with the worker region
(tests/python/ldes_with_regions.py), next to what the run measured.

Printed, per run:
- connections/s: the model's throughput of the connection set-up method
  (NioEndpoint::setSocketOptions, one call per accepted connection) against the load's;
- machine CPU: the model's utilisation of the CPUs, every class (the traced calls, the
  untraced threads of Tomcat and the tasks the trace does not follow: the load
  generator) against /proc/stat's busy share over the load's run;
- server time per connection: the predicted response times of the traced outermost
  methods (Little's law over the jobs inside the region) weighed by their calls per
  connection, against the same sum measured by sonda (wall time of the outermost calls
  per connection), and the load's mean connection time, of which it is a part: the rest
  is the client's own work (its handshake crypto, in another JVM) and the network
  round trips between the handshake's legs, neither of which the attach records.

usage: model_vs_load.py TRACE SONDA VENV MACHINE_BUSY_FRACTION LOAD_LINE
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONNECTION = "NioEndpoint::setSocketOptions"
SAMPLES = os.environ.get("LDES_SAMPLES", "300000")


def main():
    trace, sonda, venv, busy, load = sys.argv[1:6]
    lf = dict(kv.split("=") for kv in load.split()[1:])
    svc = json.loads(subprocess.run([sonda, "services", trace, "--format", "json"],
                                    check=True, capture_output=True).stdout)
    cpus = svc["trace"]["cpus"]
    jsimg = os.path.splitext(trace)[0] + ".jsimg"
    subprocess.run([sonda, "model", trace, "--run-queues", "-o", jsimg], check=True, capture_output=True)
    out = subprocess.run([os.path.join(venv, "bin/python"), os.path.join(ROOT, "tests/python/ldes_with_regions.py"),
                          jsimg, "1", SAMPLES], check=True, capture_output=True, text=True).stdout
    x, jobs, util = {}, {}, 0.0
    for line in out.splitlines()[1:]:
        f = line.split(",")
        if len(f) != 8:
            continue
        if f[0] == "Source":
            x[f[1]] = float(f[7])
        elif f[0] == "Blocked" or f[0].startswith("CPU"):
            jobs[f[1]] = jobs.get(f[1], 0.0) + float(f[2])
            if f[0].startswith("CPU"):
                util += float(f[3]) / cpus
    top = [m for m in svc["whole"]["methods"] if m["top_level_calls"] > 0]
    conn = next(m for m in top if CONNECTION in m["method"])
    x_conn = next(v for k, v in x.items() if CONNECTION in k)
    measured = sum(m["throughput_per_s"] * m["inclusive"]["wall"]["mean"] / 1e9 for m in top) \
        / conn["throughput_per_s"]
    predicted = sum(jobs.get(m["method"], 0.0) for m in top) / x_conn
    load_x, load_ms = float(lf["throughput"]), float(lf["conn_ms_mean"])
    busy = float(busy)

    def err(m, p):
        return f"{(p - m) / m * 100:+.1f}%" if m else "n/a"

    print(f"  model (LDES): connections/s {x_conn:.2f} vs load {load_x:.2f} ({err(load_x, x_conn)}); "
          f"machine CPU {util * 100:.1f}% vs {busy * 100:.1f}% ({err(busy, util)}); "
          f"server time per connection {predicted * 1e3:.3f} ms vs {measured * 1e3:.3f} ms measured "
          f"({err(measured, predicted)}), of a mean connection time of {load_ms:.3f} ms (load) "
          f"({measured * 1e3 / load_ms * 100:.0f}% of it)")


if __name__ == "__main__":
    main()
