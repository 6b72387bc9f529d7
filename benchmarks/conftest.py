"""Benchmark setup: name the machine in the saved JSON (CPU model, cores, numpy's BLAS)."""

import os
import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def pytest_benchmark_update_machine_info(config, machine_info):
    import numpy as np

    machine_info["cpu_model"] = cpu_model()
    machine_info["cores"] = os.cpu_count()
    machine_info["numpy"] = np.__version__
    machine_info["blas"] = str(np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {}))
