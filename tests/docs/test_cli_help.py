"""The command line as documentation: every command says what it does, its help renders cleanly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sharebench.cli import COMMANDS, build_parser, plugin_commands
from tools.reference import command_parsers, subcommands

ALL = {**COMMANDS, **plugin_commands()}


def test_every_command_has_a_one_line_description():
    for name in ALL:
        parser, help_text = subcommands(build_parser(name))[name]
        assert help_text and "\n" not in help_text, name
        assert parser.description and parser.description.strip(), f"sharebench {name} has no description"


def test_every_subcommand_has_a_one_line_help():
    for path, _parser, help_text in command_parsers():
        assert help_text.strip() and "\n" not in help_text.strip(), f"{path} has no one-line help"


def test_no_help_text_shows_a_doubled_percent_sign():
    # argparse expands % in an option's help, not in a description: "95%%" there is printed as it is
    for path, parser, _help in command_parsers():
        text = parser.format_help()
        assert "%%" not in text, f"{path} --help shows '%%'"


@pytest.mark.parametrize("name", ["devices", "compile", "submit", "runs"])
def test_the_help_of_a_command_prints_its_description(name):
    out = subprocess.run(
        [sys.executable, "-m", "sharebench", name, "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    description = ALL[name][1]
    assert description[:1].upper() + description[1:] in " ".join(out.stdout.split())
