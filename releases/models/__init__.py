from releases.models.calendar import BlackoutWindow, StandardChangeTemplate
from releases.models.release import Release
from releases.models.review import Comment, SignOff, Waiver

__all__ = ["BlackoutWindow", "Comment", "Release", "SignOff", "StandardChangeTemplate", "Waiver"]
