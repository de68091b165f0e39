"""lpips_explorer.space_view and figures.space: the map's coordinates, the extreme pairs, the figures."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lpips_explorer.figures.space import MAP_THUMBNAILS, image_strip, space_map, spread
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


def test_spread_parts_overlapping_squares_and_leaves_the_rest():
    """A cluster (three coincident points and one close by) is parted so that no two squares of the
    side overlap; a point that overlaps nothing does not move; the same input gives the same places."""
    xy = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.05, 0.02], [5.0, 5.0]])
    side = 0.5
    p = spread(xy, side)
    gap = np.abs(p[:, None] - p[None])
    apart = (gap[..., 0] >= side - 1e-6) | (gap[..., 1] >= side - 1e-6)
    np.fill_diagonal(apart, True)
    assert apart.all()
    assert p[4].tolist() == [5.0, 5.0] and np.array_equal(p, spread(xy, side))
    assert np.abs(p[:4] - xy[:4]).max() < 2 * side  # moved only as far as parting them needs
    with pytest.raises(ValueError, match="side"):
        spread(xy, 0.0)


def test_space_map_thumbnails_do_not_cover_each_other():
    """Near-duplicates at almost one point: their thumbnails are placed apart, each framed in its
    group's colour, the points (hover, click) at the thumbnails; a moved thumbnail is tied to its
    point by a line; the legend is below the map."""
    xy = np.array([[0.0, 0.0], [0.001, 0.0], [0.0, 0.001], [1.0, 1.0]])
    fig = space_map(xy, ["a", "b", "c", "d"], thumbnails=["data:x"] * 4, groups=["g", "h", "h", "g"], highlight=1)
    boxes = [(im.x, im.y, im.sizex) for im in fig.layout.images]
    for i in range(4):
        for j in range(i + 1, 4):
            (xi, yi, s), (xj, yj, _) = boxes[i], boxes[j]
            assert abs(xi - xj) >= s or abs(yi - yj) >= s, (boxes[i], boxes[j])
    g, h = fig.data[0], fig.data[1]
    assert (list(g.x), list(g.y)) == ([boxes[0][0], boxes[3][0]], [boxes[0][1], boxes[3][1]])
    assert any(sh.type == "line" for sh in fig.layout.shapes)
    assert fig.data[-1].name == "query" and fig.data[-1].x[0] == boxes[1][0]
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y == 0


def test_diversity_scale_orders_the_points_and_writes_them_like_the_page():
    from lpips_explorer.figures.space import diversity_scale

    html = diversity_scale({"independent noise": 0.1474, "this set": 0.76137, "one <b> image": 0.0014},
                           this="this set")
    rows = re.findall(r'data-label="([^"]+)" data-value="([^"]+)"', html)
    assert [r[0] for r in rows] == ["one &lt;b&gt; image", "independent noise", "this set"]  # smallest first
    assert ">0.7614</div>" in html and "width:100.00%" in html
    with pytest.raises(ValueError, match="not among"):
        diversity_scale({"a": 0.1}, this="b")


def test_reference_sets_near_duplicates_low_and_group_diversity():
    """The reference sets at a small size: near-duplicates (faint noise on one image) far below
    independent noise; the same size and seed give the same images; one folder's diversity is the
    mean of its pairs' distances."""
    from lpips_core.spec import parse_spec
    from lpips_explorer.space_view import (REFERENCE_SETS, SpaceView, group_diversity, reference_diversity,
                                           reference_images)

    sets = reference_images((24, 40), n=3)
    assert list(sets) == list(REFERENCE_SETS) and all(im.shape == (24, 40, 3) for v in sets.values() for im in v)
    assert all(np.array_equal(a, b) for a, b in zip(sets["independent noise"], reference_images((24, 40), n=3)
                                                    ["independent noise"]))
    spec = parse_spec("lpips-alex")
    got = reference_diversity(spec.build("cpu"), spec, (32, 32), n=3)
    near, noise = got["one image, faint noise"], got["independent noise"]
    assert 0 <= near < 0.02 and noise > 5 * near
    d = np.array([[0, 1, 2], [1, 0, 4], [2, 4, 0]], dtype=float)
    v = SpaceView(["a/1", "a/2", "b/3"], ["a", "a", "b"], d, {}, np.zeros((3, 2)), [], np.zeros((3, 1)),
                  np.zeros((3, 1)), {}, "x", [1, 1], [])
    assert group_diversity(v, "a") == 1.0
    with pytest.raises(ValueError, match="at least 2"):
        group_diversity(v, "b")
