"""Prometheus text for ``/metrics`` (only routed when ``-proxy-metrics`` or ``-runtime-metrics``)."""

from __future__ import annotations

import os
import resource
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chaos.toxiproxy_server.proxy import Proxy


class Metrics:
    """Byte counters per proxy and direction (as Toxiproxy's proxy metrics), and process figures."""

    def __init__(self, proxy_metrics: bool, runtime_metrics: bool) -> None:
        self.proxy_metrics = proxy_metrics
        self.runtime_metrics = runtime_metrics
        self.counters: dict[tuple[str, str, str, str], list[int]] = {}
        self.started = time.time()

    def counter(self, proxy: Proxy, direction: str) -> list[int] | None:
        """[received, sent] bytes, shared by every connection of the proxy in that direction."""
        if not self.proxy_metrics:
            return None
        key = (direction, proxy.listen, proxy.name, proxy.upstream)
        return self.counters.setdefault(key, [0, 0])

    def render(self) -> str:
        lines: list[str] = []
        if self.proxy_metrics:
            for i, metric in enumerate(
                ("toxiproxy_proxy_received_bytes_total", "toxiproxy_proxy_sent_bytes_total")
            ):
                lines.append(f"# TYPE {metric} counter")
                for (direction, listener, name, upstream), values in sorted(self.counters.items()):
                    labels = (
                        f'direction="{direction}",listener="{listener}",proxy="{name}",upstream="{upstream}"'
                    )
                    lines.append(f"{metric}{{{labels}}} {values[i]}")
        if self.runtime_metrics:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            lines += [
                "# TYPE process_cpu_seconds_total counter",
                f"process_cpu_seconds_total {usage.ru_utime + usage.ru_stime}",
                "# TYPE process_max_resident_memory_bytes gauge",
                f"process_max_resident_memory_bytes {usage.ru_maxrss * 1024}",
                "# TYPE process_start_time_seconds gauge",
                f"process_start_time_seconds {self.started}",
                "# TYPE process_open_fds gauge",
                f"process_open_fds {len(os.listdir('/proc/self/fd'))}",
            ]
        return "\n".join(lines) + "\n"
