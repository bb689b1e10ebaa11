"""The page kit: the frame around every page, state and links, navigation, widgets, text,
alt text and projector mode."""
