"""minigrad.amp's loss-scale managers and scalers: what their reprs say they hold."""


def test_loss_scale_managers_and_scalers_say_what_they_hold():
    from minigrad import amp
    assert repr(amp.FixedLossScaleManager(64.0, False)) == \
        "FixedLossScaleManager(loss_scale=64.0, drop_overflow_update=False)"
    assert repr(amp.DynamicLossScaleManager(2 ** 10, 2, 100)) == \
        "DynamicLossScaleManager(loss_scale=1024.0, scale_factor=2, scale_window=100)"
    assert repr(amp.StaticLossScaler(8.0)) == "StaticLossScaler(scale_value=8.0)"
    assert repr(amp.DynamicLossScaler(1024, 2, 1000)) == \
        "DynamicLossScaler(scale_value=1024.0, scale_factor=2, scale_window=1000)"
