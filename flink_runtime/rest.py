"""Flink's REST API, as the engine program and the benchmarks read it: the JobManager's address
of a running job (the local mini-cluster's, or a standalone cluster's) and JSON GETs against it.

The program polls it for completed checkpoints (the feed commits, the harness restarts from them)
and for the job's per-operator metrics (flink_runtime/metrics.py). Only the standard library:
the program must not wait on a client library for a few GETs a second. A cluster that requires
mutual TLS (harness/cluster_auth.py) is asked over https with the client certificate of
`CEPKIT_CLUSTER_CREDENTIALS` (kit/tls.py).
"""

from __future__ import annotations

import json
import urllib.error

from kit.tls import urlopen

TIMEOUT_S = 5.0


class RestError(RuntimeError):
    """The JobManager did not answer, or answered something that is not the expected JSON."""


def rest_url(job_client) -> str | None:
    """The REST address (http://host:port) of the JobManager running `job_client`'s job, or None
    when it cannot be told. A mini-cluster's address is asked of the MiniCluster itself (it binds
    a free port); a cluster client's of its ClusterClient (a job submitted to a standalone cluster,
    `--master flink://...`: of the ClusterClient its provider makes)."""
    j = job_client._j_job_client
    for field, getter in (("miniCluster", "getRestAddress"), ("clusterClient", "getWebInterfaceURL"),
                          ("clusterClientProvider", "getClusterClient")):
        try:
            f = j.getClass().getDeclaredField(field)
        except Exception:  # noqa: BLE001 - py4j raises its own error types for a missing field
            continue
        f.setAccessible(True)
        target = f.get(j)
        value = getattr(target, getter)()
        if field == "miniCluster":
            value = value.get().toString()
        elif field == "clusterClientProvider":
            client, value = value, value.getWebInterfaceURL()
            client.close()
        return str(value).rstrip("/")
    return None


def get_json(base_url: str, path: str, timeout_s: float = TIMEOUT_S) -> dict:
    """GET `base_url + path` as a JSON object."""
    try:
        with urlopen(base_url + path, timeout=timeout_s) as r:       # mutual TLS when the cluster asks it
            doc = json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError) as e:
        raise RestError(f"{base_url}{path}: {e}") from None
    if not isinstance(doc, dict):
        raise RestError(f"{base_url}{path}: expected a JSON object")
    return doc


def latest_checkpoint(base_url: str, job_id: str) -> tuple[dict | None, int | None]:
    """The job's latest completed checkpoint ({id, trigger_ts_ms, completed_ts_ms, path, size,
    duration_ms}, or None while there is none) and when the job was last restored from one (epoch
    ms; None: never)."""
    doc = get_json(base_url, f"/jobs/{job_id}/checkpoints")
    latest = doc.get("latest") or {}
    restored = latest.get("restored") or {}
    restored_ms = int(restored["restore_timestamp"]) if restored.get("restore_timestamp") else None
    done = latest.get("completed") or None
    if not done:
        return None, restored_ms
    path = str(done.get("external_path") or "")
    if path.startswith("file:"):
        path = path[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
    return ({"id": int(done["id"]), "trigger_ts_ms": int(done["trigger_timestamp"]),
             "completed_ts_ms": int(done["latest_ack_timestamp"]), "path": path,
             "size": int(done.get("checkpointed_size") or 0),
             "duration_ms": int(done.get("end_to_end_duration") or 0)}, restored_ms)
