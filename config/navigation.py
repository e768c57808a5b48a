"""The site's navigation: one registry of sections, shown by role in templates/base.html.

A section is a NavItem; a new page joins the navigation with one call, usually in its app's
AppConfig.ready():

    from config.navigation import NavItem, nav_register
    nav_register(NavItem("endpoints", "Endpoints", "engine:endpoint-list", group=ADMIN_GROUP))

Items whose URL name does not resolve (an app not installed yet) are left out, so a branch can
register its section before its URLs exist. The current section is the item whose URL is the
longest prefix of the request's path; a view can name it instead with `request.nav_section`.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse

from annotate.roles import ADMIN, ANNOTATOR, RESEARCHER, group_names

ANNOTATOR_GROUP = "Annotation"
RESEARCHER_GROUP = "Research"
ADMIN_GROUP = "Administration"
GROUP_ROLES = {
    ANNOTATOR_GROUP: (ANNOTATOR,),
    RESEARCHER_GROUP: (ADMIN, RESEARCHER),
    ADMIN_GROUP: (ADMIN,),
}


@dataclass(frozen=True)
class NavItem:
    section: str  # a short key, unique in the registry
    label: str
    url_name: str
    group: str = RESEARCHER_GROUP  # decides who sees it: GROUP_ROLES
    staff_only: bool = False  # Django's admin needs is_staff as well as the admin role


NAV_ITEMS: list[NavItem] = [
    NavItem("tasks", "My tasks", "work:dashboard", group=ANNOTATOR_GROUP),
    NavItem("label-words", "Label-word tasks", "verbalizer:work-list", group=ANNOTATOR_GROUP),
    NavItem("revision", "Revision sessions", "revision:home", group=ANNOTATOR_GROUP),
    NavItem("benchmarks", "Benchmarks", "annotate:benchmark-list"),
    NavItem("projects", "Projects", "work:project-list"),
    NavItem("imports", "Imports", "annotate:import-list"),
    NavItem("reports", "Reports", "reports:list"),
    NavItem("annotators", "Annotators", "annotators:list"),
    NavItem("verbalizer", "Verbalizer", "verbalizer:overview"),
    NavItem("revision-reports", "Revision studies", "revision-reports:list"),
    NavItem("judges", "Judges", "judge:config-list"),
    NavItem("judge", "Judge runs", "judge:run-list"),
    NavItem("runs", "Model runs", "engine:run-list"),
    NavItem("crowd", "Crowd", "crowd:publication-list", group=ADMIN_GROUP),
    NavItem("endpoints", "Endpoints", "engine:endpoint-list", group=ADMIN_GROUP),
    NavItem("admin", "Admin", "admin:index", group=ADMIN_GROUP, staff_only=True),
]


def nav_register(item: NavItem) -> None:
    """Add a section (or replace the one with the same key) to the navigation."""
    NAV_ITEMS[:] = [existing for existing in NAV_ITEMS if existing.section != item.section]
    NAV_ITEMS.append(item)
    _VISIBLE.clear()


@dataclass(frozen=True)
class NavLink:
    section: str
    label: str
    url: str
    current: bool


def nav_groups(request: HttpRequest) -> list[tuple[str, list[NavLink]]]:
    """Return [(group, links)] the user may open, the current section marked."""
    user = request.user
    roles = set(group_names(user)) if user.is_active else set()
    if user.is_active and user.is_superuser:
        roles.add(ADMIN)
    visible = _visible(frozenset(roles), user.is_staff)
    current = getattr(request, "nav_section", None) or _longest_prefix(request.path, visible)
    groups: dict[str, list[NavLink]] = {}
    for item, url in visible:
        link = NavLink(item.section, item.label, url, item.section == current)
        groups.setdefault(item.group, []).append(link)
    return [(group, groups[group]) for group in GROUP_ROLES if group in groups]


# The links each combination of roles sees, reversed once per URL configuration and script
# prefix: reversing every section's URL on every page cost more CPU than the rest of the menu.
_VISIBLE: dict[tuple, list[tuple[NavItem, str]]] = {}


def _visible(roles: frozenset[str], is_staff: bool) -> list[tuple[NavItem, str]]:
    key = (roles, is_staff, get_urlconf() or settings.ROOT_URLCONF, get_script_prefix())
    if key not in _VISIBLE:
        _VISIBLE[key] = [
            (item, url)
            for item in NAV_ITEMS
            if roles.intersection(GROUP_ROLES[item.group]) and (is_staff or not item.staff_only)
            for url in _reversed(item.url_name)
        ]
    return _VISIBLE[key]


def _reversed(url_name: str) -> list[str]:
    try:
        return [reverse(url_name)]
    except NoReverseMatch:
        return []


def _longest_prefix(path: str, visible: list[tuple[NavItem, str]]) -> str | None:
    matches = [(len(url), item.section) for item, url in visible if path.startswith(url)]
    return max(matches)[1] if matches else None


def navigation(request: HttpRequest) -> dict:
    """Template context processor: `nav_groups` for templates/base.html."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"nav_groups": []}
    return {"nav_groups": nav_groups(request)}
