"""Interventions: causal experiments on the model, live and exact: patching, ablation and
steering (the sections are in tinygpt_app/sections/interventions.py)."""

from __future__ import annotations

import streamlit as st

from tinygpt_app.kit.controls import EXPERIMENT
from tinygpt_app.kit.frame import page
from tinygpt_app.kit.state import control
from tinygpt_app.sections.interventions import (
    ablation_section,
    patching_section,
    steering_section,
)

with page("Interventions",
          intro="Causal experiments: change one thing inside the model and measure what it "
                "says. Patching finds where a fact is carried; ablation silences heads or "
                "neurons; steering pushes the model along a direction.") as state:
    experiment = control(st.radio, "Experiment", "interventions.experiment", EXPERIMENT,
                         horizontal=True)
    if experiment == "Patching":
        patching_section(state)
    elif experiment == "Ablation":
        ablation_section(state)
    else:
        steering_section(state)
