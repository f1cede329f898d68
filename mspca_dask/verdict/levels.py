"""Every constant of the verdict, in one place: statistical levels and model definitions."""

#: Default level of every test of the verdict (the group test over the whole fit; the
#: per-pair tests Bonferroni-corrected over the candidate pairs).  ``fit(alpha=...)``.
from __future__ import annotations

ALPHA = 0.05

#: Most groups a mixture may have (ten 1 % batches and the inliers fit).
MAX_GROUPS = 12

#: Rows the group test fits (a fixed, seeded subsample above it; memberships of every row
#: come from the fitted mixture).
MAX_TEST_ROWS = 4000

#: Definition of the unimodal twin: kernel-density modes lower than this share of the
#: highest are not counted (a few samples in a long tail are not a mode).
MODE_HEIGHT = 0.02

#: Smallest group: fewer rows cannot give a group its own mean and variance.
MIN_GROUP_ROWS = 5

#: A pair carries a within-group spike when matched to it and within 60° of it (``|cos| ≥
#: 0.5``): the same yardstick the accuracy studies use for "aligned".
MIN_CARRIED_COSINE = 0.5
