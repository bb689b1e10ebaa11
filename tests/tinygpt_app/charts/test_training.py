"""Charts of training: the loss curve holds both losses and the uniform-guess floor."""

from __future__ import annotations

import numpy as np
import pytest

from tinygpt_app.charts import training


def test_loss_curve_holds_train_and_validation_losses():
    fig = training.loss_curve(np.arange(1, 5), np.array([6.0, 5.5, 5.0, 4.8]), np.array([2, 4]),
                              np.array([5.6, 4.9]), "t", floor=np.log(512))
    np.testing.assert_allclose(fig.data[0].y, [6.0, 5.5, 5.0, 4.8], rtol=1e-6)
    np.testing.assert_allclose(fig.data[1].y, [5.6, 4.9], rtol=1e-6)
    assert fig.layout.shapes[0].y0 == pytest.approx(np.log(512))
