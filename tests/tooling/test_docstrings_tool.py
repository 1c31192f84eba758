"""tools.docstrings: reST roles become mkdocstrings cross-references; the check that `make docs` runs.

Runs with the main venv only (the tool reads source with ``ast``; no mkdocs needed).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tools.docstrings import convert, problems

CORE = '''\
"""The core: :class:`Widget` and :func:`~pkg.core.make`."""

from decimal import Decimal

LIMIT = 3
"""The limit."""

__all__ = ["LIMIT", "Widget", "make"]


class Base:
    """A base."""

    def inherited(self) -> None:
        """From the base."""


class Widget(Base):
    """A widget: :meth:`spin`, :meth:`inherited`, :attr:`size`, :attr:`Widget.size`,
    :class:`~decimal.Decimal`, :func:`json.loads`, :meth:`_private` and
    :meth:`Widget.spin
    <pkg.core.Widget.spin>`. Built like this::

        Widget(3)
    """

    def __init__(self, size: int) -> None:
        self.size = size

    def spin(self) -> None:
        """Spins (see :data:`LIMIT` and :class:`Decimal`)."""

    def _private(self) -> None:
        """Not on the site."""


def make() -> Widget:
    """A :class:`Widget`, as :mod:`pkg.core` builds it. ::

        make()
    """
    return Widget(1)
'''

INIT = '''\
"""The package: :mod:`.core` and :class:`pkg.core.Widget`.

::

    from pkg import Widget
"""

from pkg.core import Widget

__all__ = ["Widget"]
'''

CONVERTED_CORE_DOC = (
    '"""A widget: [`spin`][pkg.core.Widget.spin], [`inherited`][pkg.core.Base.inherited], '
    "[`size`][pkg.core.Widget.size], [`Widget.size`][pkg.core.Widget.size],\n"
    "    `Decimal`, `json.loads`, `_private` and\n"
    "    [`Widget.spin`][pkg.core.Widget.spin]. Built like this:\n"
    "\n"
    "        Widget(3)\n"
)


def package(tmp_path: Path, core: str = CORE, init: str = INIT) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text(init)
    (root / "core.py").write_text(core)
    page = tmp_path / "pkg.md"
    page.write_text('::: pkg\n    options:\n      members: ["Widget"]\n')
    return root


def test_every_role_becomes_a_cross_reference_to_where_its_object_is_defined(tmp_path: Path) -> None:
    root = package(tmp_path)
    changed, missing = convert(root)
    assert missing == []
    assert sorted(p.name for p in changed) == ["__init__.py", "core.py"]
    core = (root / "core.py").read_text()
    assert '"""The core: [`Widget`][pkg.core.Widget] and [`make`][pkg.core.make]."""' in core
    assert CONVERTED_CORE_DOC in core
    assert '"""Spins (see [`LIMIT`][pkg.core.LIMIT] and `Decimal`)."""' in core
    assert '"""A [`Widget`][pkg.core.Widget], as [`pkg.core`][pkg.core] builds it.\n\n        make()' in core
    init = (root / "__init__.py").read_text()
    assert init.startswith('"""The package: [`core`][pkg.core] and [`pkg.core.Widget`][pkg.core.Widget].\n\n    from pkg')
    assert ":" + "class:" not in core + init


def test_converting_twice_changes_nothing(tmp_path: Path) -> None:
    root = package(tmp_path)
    convert(root)
    once = {p.name: p.read_text() for p in root.iterdir() if p.is_file()}
    changed, missing = convert(root)
    assert (changed, missing) == ([], [])
    assert {p.name: p.read_text() for p in root.iterdir() if p.is_file()} == once


def test_an_unknown_target_is_left_and_reported(tmp_path: Path) -> None:
    root = package(tmp_path, core=CORE.replace(":data:`LIMIT`", ":data:`NO_SUCH`"))
    _, missing = convert(root)
    assert len(missing) == 1 and ":data:`NO_SUCH`" in missing[0]
    assert ":data:`NO_SUCH`" in (root / "core.py").read_text()


def test_the_check_passes_a_converted_documented_package(tmp_path: Path) -> None:
    root = package(tmp_path)
    convert(root)
    assert problems(root, tmp_path / "pkg.md") == []


def test_the_check_fails_on_a_role_left(tmp_path: Path) -> None:
    root = package(tmp_path)
    found = problems(root, tmp_path / "pkg.md")
    assert any("reST role ':class:`Widget`'" in line for line in found)
    assert any("literal-block marker" in line for line in found)


def test_the_check_fails_on_a_role_the_converter_does_not_know(tmp_path: Path) -> None:
    root = package(tmp_path, core=CORE.replace('"""A base."""', '"""A base (see :ref:`bases`)."""'))
    convert(root)
    found = problems(root, tmp_path / "pkg.md")
    assert [line.split(": ", 1)[1] for line in found] == ["reST role ':ref:`bases`'"]


@pytest.mark.parametrize(
    ("undocument", "kind"),
    [
        ('    def spin(self) -> None:\n        """Spins (see :data:`LIMIT` and :class:`Decimal`)."""\n', "function pkg.core.Widget.spin"),
        ('class Base:\n    """A base."""\n', "class pkg.core.Base"),
        ('LIMIT = 3\n"""The limit."""\n', "attribute pkg.core.LIMIT"),
        ('"""The core: :class:`Widget` and :func:`~pkg.core.make`."""\n', "module pkg.core"),
    ],
)
def test_the_check_fails_on_an_undocumented_public_name(tmp_path: Path, undocument: str, kind: str) -> None:
    stripped = "\n".join(line for line in undocument.splitlines() if '"""' not in line) + "\n"
    stripped += "        pass\n" if undocument.startswith("    def") else "    pass\n" if undocument.startswith("class") else ""
    assert undocument in CORE
    root = package(tmp_path, core=CORE.replace(undocument, stripped))
    convert(root)
    found = problems(root, tmp_path / "pkg.md")
    assert [line.split(": ", 1)[1] for line in found] == [kind + (" (in __all__)" if kind.startswith("attribute") else "")]


def test_the_check_fails_on_an_undocumented_property_but_not_on_private_names(tmp_path: Path) -> None:
    extra = textwrap.dedent(
        '''

        class Gauge:
            """A gauge."""

            @property
            def level(self) -> int:
                return 1

            def _hidden(self) -> None:
                pass


        def _helper() -> None:
            pass
        '''
    )
    root = package(tmp_path, core=CORE + extra)
    convert(root)
    found = problems(root, tmp_path / "pkg.md")
    assert [line.split(": ", 1)[1] for line in found] == ["property pkg.core.Gauge.level"]


def test_the_check_fails_when_the_root_page_does_not_list_the_root_names(tmp_path: Path) -> None:
    root = package(tmp_path, init=INIT.replace('__all__ = ["Widget"]', '__all__ = ["Widget", "make"]\nfrom pkg.core import make'))
    convert(root)
    found = problems(root, tmp_path / "pkg.md")
    assert len(found) == 1 and "members ['Widget'] are not pkg.__all__ ['Widget', 'make']" in found[0]


def test_the_layers_docstrings_pass_the_check() -> None:
    """What `make docs` checks before mkdocs runs: no reST left, every public name documented."""
    assert problems() == []
