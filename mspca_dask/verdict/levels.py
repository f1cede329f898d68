"""Every constant of the verdict, in one place: statistical levels and model definitions."""

#: Default level of every test of the verdict (the group test over the whole fit; the
#: per-pair tests Bonferroni-corrected over the candidate pairs).  ``fit(alpha=...)``.
from __future__ import annotations

ALPHA = 0.05

#: Most groups a mixture may have (ten 1 % batches and the inliers fit).
MAX_GROUPS = 12

#: Covariance form in which groups are counted (:mod:`~mspca_dask.verdict.mixture`): one
#: shape at each group's own scale, as batches with more noise and populations of another
#: diversity have.  It is the model under which each step's test holds its level ``α``: with
#: a covariance of its own, a group can take a skewed factor's tail from the inliers, and the
#: next step's twins, drawn from that group, no longer reproduce the tail it parts off.
COUNTED_FORM = "proportional"

#: Rows the group test fits (a fixed, seeded subsample above it; memberships of every row
#: come from the fitted mixture).
MAX_TEST_ROWS = 4000

#: Definition of the unimodal twin: a kernel-density bump is a mode when it rises above its
#: neighbouring valley by more than this many standard errors of the estimate (one-sided 5 %):
#: ripples of a flat top and single samples in a long tail are not modes.
MODE_Z = 1.645

#: Smallest group: fewer rows cannot give a group its own mean and variance (and a
#: kernel-density bump holding fewer rows is no group's mode: :mod:`.twins`).
MIN_GROUP_ROWS = 5

#: A pair carries a within-group spike when matched to it and within 60° of it (``|cos| ≥
#: 0.5``): the same yardstick the accuracy studies use for "aligned".
MIN_CARRIED_COSINE = 0.5
