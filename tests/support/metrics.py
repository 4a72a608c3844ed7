"""The controller's Prometheus metrics, scraped as a monitoring system would."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

NAMESPACE = "default"


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never through a proxy


def scrape(port: int, timeout: float = 30.0) -> dict[str, float]:
    """The controller's metrics as ``{'name{label="v",...}': value}``.

    A controller that was just (re)started serves them a moment later, and tells nobody:
    connection refused is retried until ``timeout``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with _DIRECT.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                text = response.read().decode()
            break
        except urllib.error.URLError as exc:
            if not isinstance(exc.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                raise AssertionError(f"controller metrics on port {port}: {exc.reason}") from None
            time.sleep(0.1)
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    return samples


def restarted_total(port: int, framework: str = "pytorch") -> float:
    key = f'training_operator_jobs_restarted_total{{framework="{framework}",job_namespace="{NAMESPACE}"}}'
    return scrape(port).get(key, 0.0)
