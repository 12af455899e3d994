"""The fine-tuning suite's settings model, validated when pytest starts (pytest_topsail/fine_tuning/settings.py)."""

from pytest_topsail.fine_tuning import SuiteSettings

SETTINGS = {"tests.fine_tuning": SuiteSettings}
