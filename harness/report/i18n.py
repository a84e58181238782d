"""Report languages: every word a report prints comes from a message catalog
(``harness/report/locale/<lang>/LC_MESSAGES/kvgate.po``, gettext format, read with Babel), never
from code. English is the source language (msgids); ``zh`` is Simplified Chinese.

Rules: numbers, units and dates are not translated (ISO-8601 dates, units as ``harness.units``
writes them, check ids, verdict codes PASS/FAIL/... stay as they are, so a bilingual reader and
a script read the same values); text recorded in ``result.json`` (check descriptions, reasons,
faults, notes) is data and stays as recorded. Python code marks the words it hands to templates
with ``N_`` (a no-op the extractor knows); templates translate with ``_``.
"""

from __future__ import annotations

import gettext
import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from importlib import resources
from typing import Optional

from harness.errors import InputError

LANGS = ("en", "zh")
DEFAULT_LANG = "en"
DOMAIN = "kvgate"


def N_(message: str) -> str:  # noqa: N802 - the gettext convention for "mark, do not translate here"
    return message


# Words that come from data with a fixed vocabulary (gate files' severities), translated in templates.
VOCABULARY = (N_("blocker"), N_("advisory"))


def check_lang(lang: Optional[str]) -> str:
    lang = (lang or DEFAULT_LANG).strip().lower()
    if lang not in LANGS:
        raise InputError(f"--lang {lang!r}: expected one of {', '.join(LANGS)}")
    return lang


def catalog_path(lang: str) -> str:
    return f"locale/{lang}/LC_MESSAGES/{DOMAIN}.po"


@cache
def translations(lang: str) -> gettext.NullTranslations:
    """The gettext translations of ``lang`` (English: the identity)."""
    lang = check_lang(lang)
    if lang == "en":
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    text = resources.files("harness.report").joinpath(catalog_path(lang)).read_bytes()
    catalog = read_po(io.BytesIO(text), locale=lang, domain=DOMAIN)
    buf = io.BytesIO()
    write_mo(buf, catalog)
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def suffix(lang: str) -> str:
    """File name infix of a report language: ``report.html`` (en), ``report.zh.html`` (zh)."""
    return "" if check_lang(lang) == DEFAULT_LANG else f".{lang}"


_GETTEXT: ContextVar[Callable[[str], str]] = ContextVar("report_gettext", default=str)


@contextmanager
def language(lang: str) -> Iterator[None]:
    """Within this block, ``_t`` translates into ``lang`` (the view and the charts build their
    text with it)."""
    token = _GETTEXT.set(translations(lang).gettext)
    try:
        yield
    finally:
        _GETTEXT.reset(token)


def _t(message: str) -> str:
    """``message`` in the current report language (English outside ``language()``)."""
    return _GETTEXT.get()(message)
