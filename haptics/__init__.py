"""Haptic devices and what surrounds them in the servo loop.

Modules (import what you need; nothing heavy is imported here):

* ``haptics.device``: the ``Device`` protocol, ``DeviceSpec``, ``DeviceState``.
* ``haptics.safety``: ``SafetyLayer``, the same for every backend (clamp, continuous
  limit, rate limit, non-finite guard, engage ramp, watchdog).
* ``haptics.mapping``: ``WorkspaceMapping`` device frame <-> task frame, with a clutch.
* ``haptics.timing``: ``ServoTiming`` tick-period statistics for every run.
* ``haptics.simulated``: ``SimulatedDevice`` (eq. 8) held by an operator model.
* ``haptics.operators``: simulated participants (``make_operator``, ``sample_population``).
* ``haptics.participants``: their parameters and the built-in kinds (``PARTICIPANT_PRESETS``).
* ``haptics.mouse``: ``MouseDevice``, a pygame stand-in (forces drawn, not felt).
* ``haptics.shared_input``: ``SharedInputDevice``, the ``mouse`` backend's device when the
  pointer is another process's window (``open_device("mouse", input_name=...)``).
* ``haptics.openhaptics`` / ``haptics.backends``: the real Touch and the backend registry.
"""
