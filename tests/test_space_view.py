"""lpips_explorer.space_view and figures.space: the map's coordinates, the extreme pairs, the figures."""

from __future__ import annotations

import numpy as np
import pytest

from lpips_explorer.figures.space import MAP_THUMBNAILS, image_strip, space_map
from lpips_explorer.space_view import extreme_pairs, map_coordinates, thumbnail


def test_mds_recovers_a_planar_set():
    """Points in the plane, given as *squared* distances (as LPIPS is): the map's distances equal
    the true ones (MDS of √d), up to a rigid motion."""
    rng = np.random.default_rng(0)
    p = rng.normal(size=(12, 2))
    d = ((p[:, None] - p[None]) ** 2).sum(-1)
    xy = map_coordinates(d)
    got = np.sqrt(((xy[:, None] - xy[None]) ** 2).sum(-1))
    assert np.abs(got - np.sqrt(d)).max() < 1e-3
    assert np.array_equal(xy, map_coordinates(d))  # deterministic
    assert map_coordinates(np.array([[0.0, 4.0], [4.0, 0.0]])).tolist() == [[0.0, 0.0], [2.0, 0.0]]
    with pytest.raises(ValueError, match="non-negative"):
        map_coordinates(-d)


def test_extreme_pairs():
    d = np.array([[0, 3, 1], [3, 0, 5], [1, 5, 0]], dtype=float)
    assert extreme_pairs(d) == ((0, 2), (1, 2))
    with pytest.raises(ValueError, match="at least 2"):
        extreme_pairs(np.zeros((1, 1)))


def test_space_map_has_a_point_and_a_thumbnail_per_image():
    xy = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    thumbs = [thumbnail(np.full((8, 8, 3), v)) for v in (0.0, 0.5, 1.0)]
    fig = space_map(xy, ["a", "g/b", "g/c"], thumbnails=thumbs, groups=["", "g", "g"],
                    nearest=[("g/b", 0.5), ("a", 0.5), ("a", 2.0)], highlight=2)
    traces = [t for t in fig.data if t.name != "query"]
    assert [list(t.customdata) for t in traces] == [[0], [1, 2]]
    assert traces[1].text == ("g/b<br>nearest: a (0.5000)", "g/c<br>nearest: a (2.0000)")
    assert len(fig.layout.images) == 3 and fig.layout.images[0].source.startswith("data:image/png;base64,")
    assert fig.data[-1].name == "query" and list(fig.data[-1].x) == [0.0]
    many = space_map(np.zeros((MAP_THUMBNAILS + 1, 2)), [str(i) for i in range(MAP_THUMBNAILS + 1)],
                     thumbnails=["x"] * (MAP_THUMBNAILS + 1))
    assert len(many.layout.images) == 0  # dots only
    with pytest.raises(ValueError, match=r"xy must have shape \(2, 2\)"):
        space_map(xy, ["a", "b"])


def test_image_strip():
    fig = image_strip(["data:a", "data:b"], ["query", "1 · 0.1000"], hover=["x.png", "y 100%.png"])
    assert [a.text for a in fig.layout.annotations] == ["query", "1 · 0.1000"]
    assert [t.name for t in fig.data] == ["x.png", "y 100%.png"]
    assert fig.data[1].hovertemplate == "y 100%%.png<extra></extra>"
    with pytest.raises(ValueError, match="one title"):
        image_strip(["data:a"], [])
