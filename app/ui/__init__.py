"""The interactive trainer: a pygame window in the main process, the servo loop in another.

Modules: :mod:`app.ui.servo` (the servo process and its control channel),
:mod:`app.ui.scene` (drawing one snapshot), :mod:`app.ui.cards` (score card and progress
view), :mod:`app.ui.window` (the trainee and experimenter flows), :mod:`app.ui.outcomes`
(how an attempt ended, in the trainee's words), :mod:`app.ui.trainee_db` (trainee history), :mod:`app.ui.data` (the data folder, NFC names), :mod:`app.ui.session`
(an experimenter's protocol session for one participant), :mod:`app.ui.pybullet_view`
(the optional PyBullet 3-D view). With
``--device mouse`` the pointer reaches the servo process through
:mod:`haptics.shared_input` (a device backend). pygame and pybullet are imported only
where used.
"""
