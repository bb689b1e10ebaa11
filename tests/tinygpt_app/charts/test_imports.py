"""The charts work outside Streamlit: importing them imports no Streamlit and changes no
process-wide setting (thread limits, the GIL switch interval)."""

from __future__ import annotations

import subprocess
import sys

from tests.apptest_support import ROOT

CHART_MODULES = ["common", "tokens", "layernorm", "attention", "residual", "logits",
                 "sampling", "decoding", "whatif", "training", "explain", "classroom", "neurons",
                 "kv_cache", "interventions", "modern.architectures", "modern.rotary",
                 "modern.grouped_heads"]


def test_every_stage_has_a_chart_module():
    charts = ROOT / "tinygpt_app" / "charts"
    found = sorted(".".join(p.relative_to(charts).with_suffix("").parts)
                   for p in charts.rglob("*.py") if p.stem != "__init__")
    assert found == sorted(CHART_MODULES)


def test_importing_the_charts_imports_no_streamlit():
    imports = "; ".join(f"import tinygpt_app.charts.{m}" for m in CHART_MODULES)
    code = (
        "import sys, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "before = sys.getswitchinterval(), threadpool_info()\n"
        f"{imports}\n"
        "assert 'streamlit' not in sys.modules, 'streamlit was imported'\n"
        "assert (sys.getswitchinterval(), threadpool_info()) == before\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
