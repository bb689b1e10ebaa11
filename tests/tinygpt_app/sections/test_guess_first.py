"""Guess first on the home page: the guess as sent (the page itself: tests/pages/test_class.py's
test_guess_first_on_the_home_page)."""

from tinygpt_app.sections.guess_first import guess_token


def test_a_new_word_gets_a_space_in_front_once():
    assert guess_token(None, "light", new_word=True) == " light"
    assert guess_token(None, " light", new_word=True) == " light"
    assert guess_token(None, "ight", new_word=False) == "ight"
    assert guess_token(None, "", new_word=True) == ""
