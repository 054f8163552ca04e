"""The plugin seam's tables held to the rest of vx."""

import pytest

from vx.cli.main import FOREIGN_VERBS, VERBS
from vx.plugins.host import CORE_VERBS


@pytest.mark.feature("PL-01")
def test_the_verbs_a_plugin_may_not_add_are_every_verb_of_vx():
    assert CORE_VERBS == set(VERBS) | set(FOREIGN_VERBS)
