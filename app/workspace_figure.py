"""The figure of a reactionless workspace map (`capture-trainer robot workspace --figure`).

Planar: a heat map of the trackable fraction over x-y. Spatial: the three grid slices
(x-y, x-z, y-z) through the cell nearest the start end effector. Each panel draws the base, the arm at its start pose (projected), the
shoulder, the start end effector and the reach circle (the slice of the reach ball).
matplotlib is imported here only, when a figure is made; the figure has its own Agg
canvas (no pyplot, no global state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from robot import _kernels as kern
from robot.models import ManipulatorModel
from robot.workspace import FRACTION_THRESHOLD, WorkspaceMap

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

AXIS_NAMES = ("x", "y", "z")


def _arm_points(model: ManipulatorModel) -> np.ndarray:
    """(n + 2, 3) base centre, joint origins and end effector at the start pose [m]."""
    a = model.arrays
    out = np.empty((model.n_joints + 2, 3))
    kern.link_points(np.array(model.q0_rad, dtype=float), np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), a.joint_xyz,
                     a.joint_rot, a.joint_axis, a.ee_offset, out)
    return out


def _panel(axes: Axes, wmap: WorkspaceMap, model: ManipulatorModel, plane: tuple[int, int],
           values: np.ndarray, simulated: np.ndarray, offset_m: float, cuts_base: bool) -> AxesImage:
    """One heat-map panel over the axes ``plane`` (values indexed [i, j] on those axes);
    ``offset_m``: distance of the slice from the shoulder; ``cuts_base``: the slice
    passes through the base box (drawn filled, else not drawn)."""
    from matplotlib.patches import Circle, Rectangle

    i, j = plane
    h = wmap.cell_size_m
    xs, ys = wmap.grid_axes_m[i], wmap.grid_axes_m[j]
    extent = (xs[0] - h / 2, xs[-1] + h / 2, ys[0] - h / 2, ys[-1] + h / 2)
    shown = np.ma.masked_where(~simulated, values)
    image = axes.imshow(shown.T, origin="lower", extent=extent, vmin=0.0, vmax=1.0, cmap="viridis",
                        interpolation="nearest")
    if np.any(values >= FRACTION_THRESHOLD) and np.any(values < FRACTION_THRESHOLD):
        axes.contour(xs, ys, values.T, levels=[FRACTION_THRESHOLD], colors="w", linewidths=0.8)
    size = np.asarray(model.base_size_m)
    if cuts_base:
        axes.add_patch(Rectangle((-size[i] / 2, -size[j] / 2), size[i], size[j], fill=True, facecolor="0.75",
                                 edgecolor="k", linewidth=0.8, zorder=3, label="base"))
    shoulder = wmap.shoulder_m
    radius_sq = wmap.reach_m ** 2 - offset_m ** 2
    if radius_sq > 0.0:
        axes.add_patch(Circle((shoulder[i], shoulder[j]), float(np.sqrt(radius_sq)), fill=False, color="k",
                              linestyle="--", linewidth=0.8, zorder=4))
    pts = _arm_points(model)
    axes.plot(pts[1:, i], pts[1:, j], "-o", color="tab:red", markersize=3, linewidth=2.0, zorder=5,
              label="arm at its start pose")
    axes.plot([shoulder[i]], [shoulder[j]], "ks", markersize=4, zorder=6, label="shoulder")
    axes.plot([pts[-1, i]], [pts[-1, j]], "*", color="w", markeredgecolor="k", markersize=11, zorder=6,
              label="start end effector")
    axes.set_xlabel(f"{AXIS_NAMES[i]} [m]")
    axes.set_ylabel(f"{AXIS_NAMES[j]} [m]")
    axes.set_aspect("equal")
    axes.set_xlim(extent[0], extent[1])
    axes.set_ylim(extent[2], extent[3])
    return image


def workspace_figure(wmap: WorkspaceMap, model: ManipulatorModel) -> Figure:
    """The map drawn as described in the module docstring."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    unit = "m²" if wmap.task_dim == 2 else "m³"
    title = (f"{wmap.model}: reactionless workspace from the start pose\n{wmap.size:.3g} {unit} with "
             f"≥ {FRACTION_THRESHOLD:.0%} of {len(wmap.axes)} approach axes trackable "
             f"({wmap.size / wmap.reach_measure:.1%} of the reach {'disc' if wmap.task_dim == 2 else 'ball'}), "
             f"cells of {wmap.cell_size_m:.3f} m")
    if wmap.task_dim == 2:
        figure = Figure(figsize=(7.0, 6.2), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        single = _panel(axes, wmap, model, (0, 1), wmap.fraction, wmap.simulated, 0.0, True)
        axes.legend(loc="lower left", fontsize=8)
        figure.colorbar(single, ax=axes, label="fraction of approach axes trackable")
        figure.suptitle(title, fontsize=10)
        return figure
    figure = Figure(figsize=(14.0, 5.0), layout="constrained")
    FigureCanvasAgg(figure)
    panels = figure.subplots(1, 3)
    shoulder = wmap.shoulder_m
    ee0 = _arm_points(model)[-1]
    image: AxesImage | None = None
    for axes, (plane, cut_axis) in zip(panels, (((0, 1), 2), ((0, 2), 1), ((1, 2), 0))):
        at = ee0[cut_axis]
        k = int(np.argmin(np.abs(wmap.grid_axes_m[cut_axis] - at)))
        cut = float(wmap.grid_axes_m[cut_axis][k])
        values = np.take(wmap.fraction, k, axis=cut_axis)
        simulated = np.take(wmap.simulated, k, axis=cut_axis)
        cuts_base = abs(cut) < 0.5 * model.base_size_m[cut_axis]
        image = _panel(axes, wmap, model, plane, values, simulated, cut - shoulder[cut_axis], cuts_base)
        axes.set_title(f"slice {AXIS_NAMES[cut_axis]} = {cut:.3f} m (arm projected)", fontsize=9)
    panels[0].legend(loc="lower left", fontsize=7)
    if image is not None:
        figure.colorbar(image, ax=list(panels), label="fraction of approach axes trackable", shrink=0.8)
    figure.suptitle(title, fontsize=10)
    return figure


def save_workspace_figure(wmap: WorkspaceMap, model: ManipulatorModel, path: str, dpi: int = 110) -> None:
    """Render the map to a PNG file."""
    workspace_figure(wmap, model).savefig(path, format="png", dpi=dpi)
