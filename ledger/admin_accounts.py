"""The admin's accounts page: people, their roles and teams, and their API tokens.

Administrators (`ledger.permissions.can_manage_accounts`) create people with
Django's user forms, and give roles and team memberships on the same page; both
go through the verbs (`set_roles`, `add_team_member`), which record an event.
A person's API token is issued or revoked from the token page linked on their
page: a new key is shown there once, in the response to the POST that made it,
and stored nowhere else that a page renders (not in a message, not in the log).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm, UsernameField
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from ledger import services
from ledger.models import Contact, Team
from ledger.models.contacts import validate_phone
from ledger.permissions import can_manage_accounts
from ledger.roles import ROLE_DUTIES, Role, roles_of
from lib.actors import admin_actor


def _role_choices() -> list[tuple[str, str]]:
    return [
        (
            role.value,
            gettext("%(role)s: %(duties)s") % {"role": role.label, "duties": ROLE_DUTIES[role]},
        )
        for role in Role
    ]


class AccountFieldsMixin(forms.Form):
    """Phone, roles and teams, on the add and the change form alike."""

    phone = forms.CharField(
        label=_("Phone or pager"),
        max_length=32,
        required=False,
        validators=[validate_phone],
        help_text=Contact._meta.get_field("phone").help_text,
    )

    roles = forms.MultipleChoiceField(
        choices=_role_choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=_("What this person may do in the ledger. Each change is recorded as an event."),
    )
    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.order_by("slug"),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=(
            _(
                "Model owners change the services, assets and runtimes of their teams. "
                "Teams can be added here; the ledger has no verb that records a removal yet."
            )
        ),
    )

    def clean_teams(self) -> QuerySet[Team]:
        teams = self.cleaned_data["teams"]
        instance = getattr(self, "instance", None)
        if instance is not None and instance.pk:
            removed = set(instance.teams.all()) - set(teams)
            if removed:
                names = ", ".join(sorted(team.slug for team in removed))
                raise forms.ValidationError(
                    gettext(
                        "Teams cannot be left here yet (%(names)s): the ledger has no verb that "
                        "records a removal. Teams can be added."
                    )
                    % {"names": names}
                )
        return teams


class AccountCreationForm(AccountFieldsMixin, AdminUserCreationForm):
    class Meta:
        model = User
        fields = ("username", "email")
        field_classes = {"username": UsernameField}


class AccountChangeForm(AccountFieldsMixin, UserChangeForm):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.initial.setdefault("roles", [role.value for role in roles_of(self.instance)])
            contact = Contact.objects.filter(user=self.instance).first()
            self.initial.setdefault("phone", contact.phone if contact else "")
            self.initial.setdefault("teams", list(self.instance.teams.all()))


admin.site.unregister(User)


@admin.register(User)
class AccountAdmin(UserAdmin):
    form = AccountChangeForm
    add_form = AccountCreationForm
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Person", {"fields": ("first_name", "last_name", "email", "phone")}),
        ("Roles and teams", {"fields": ("roles", "teams")}),
        ("API token", {"fields": ("api_token",)}),
        (
            "Access",
            {
                "fields": ("is_active", "is_staff", "is_superuser"),
                "description": (
                    "Inactive people cannot sign in and their API token is refused. Staff may "
                    "open this admin site; superusers may do everything, here and in the ledger."
                ),
            },
        ),
        ("Dates", {"fields": ("last_login", "date_joined"), "classes": ("collapse",)}),
    )
    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": (
                    "username",
                    "email",
                    "phone",
                    "usable_password",
                    "password1",
                    "password2",
                ),
                "description": (
                    "Set a password, or leave password-based sign-in off and let the person "
                    "set one through 'Forgotten your password?' (the email address must be right)."
                ),
            },
        ),
        ("Roles and teams", {"fields": ("roles", "teams")}),
    )
    readonly_fields = ("api_token", "last_login", "date_joined")
    list_display = (
        "username",
        "email",
        "full_name",
        "role_list",
        "team_list",
        "token_state",
        "is_active",
        "is_staff",
    )
    list_filter = ("groups", "teams", "is_active", "is_staff", "is_superuser")
    search_fields = ("username", "first_name", "last_name", "email")
    list_select_related = ("auth_token",)
    actions = ("revoke_tokens",)

    # -- who may

    def has_module_permission(self, request: HttpRequest) -> bool:
        return can_manage_accounts(request.user)

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return can_manage_accounts(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return can_manage_accounts(request.user)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return can_manage_accounts(request.user)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        # People act in the ledger's events: deactivate them (Access), never delete them.
        return False

    # -- the list

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        return super().get_queryset(request).prefetch_related("groups", "teams")

    @admin.display(description="name")
    def full_name(self, user: User) -> str:
        return user.get_full_name()

    @admin.display(description="roles")
    def role_list(self, user: User) -> str:
        names = {group.name for group in user.groups.all()}
        return ", ".join(str(role.label) for role in Role if role.value in names) or "—"

    @admin.display(description="teams")
    def team_list(self, user: User) -> str:
        return ", ".join(sorted(team.slug for team in user.teams.all())) or "—"

    @admin.display(description="API token")
    def token_state(self, user: User) -> str:
        token = getattr(user, "auth_token", None)
        return services.token_prefix(token.key) if token is not None else "—"

    @admin.display(description="API token")
    def api_token(self, user: User) -> str:
        if not user.pk:
            return "—"
        token = getattr(user, "auth_token", None)
        url = reverse("admin:auth_user_api_token", args=[user.pk])
        if token is None:
            return format_html('None. <a href="{}">Issue one</a>', url)
        return format_html(
            '<code>{}</code>, issued {:%Y-%m-%d %H:%M %Z}. <a href="{}">Replace or revoke it</a>',
            services.token_prefix(token.key),
            token.created,
            url,
        )

    @admin.action(description="Revoke the API tokens of the selected people")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        revoked = [
            user.get_username()
            for user in queryset
            if services.revoke_api_token(user, actor=admin_actor(request))
        ]
        if revoked:
            messages.success(
                request, gettext("API tokens revoked: %(names)s.") % {"names": ", ".join(revoked)}
            )
        else:
            messages.info(request, _("None of them had an API token."))

    # -- saving through the verbs

    def save_related(self, request: HttpRequest, form, formsets, change: bool) -> None:
        # phone, roles and teams are not fields of User: form.save_m2m() leaves them to the verbs.
        super().save_related(request, form, formsets, change)
        user, actor = form.instance, admin_actor(request)
        services.set_phone(user, form.cleaned_data.get("phone", ""), actor=actor)
        services.set_roles(user, form.cleaned_data.get("roles", []), actor=actor)
        current = set(user.teams.all())
        for team in form.cleaned_data.get("teams", []):
            if team not in current:
                services.add_team_member(team, user, actor=actor)

    # -- the token page

    def get_urls(self):
        return [
            path(
                "<int:user_id>/api-token/",
                self.admin_site.admin_view(self.api_token_view),
                name="auth_user_api_token",
            ),
            *super().get_urls(),
        ]

    def api_token_view(self, request: HttpRequest, user_id: int) -> HttpResponse:
        """GET: the token's prefix and the two buttons. POST issue: the new key, once."""
        if not can_manage_accounts(request.user):
            raise PermissionDenied
        person = get_object_or_404(User.objects.select_related("auth_token"), pk=user_id)
        new_key = None
        if request.method == "POST":
            actor = admin_actor(request)
            if request.POST.get("do") == "issue":
                new_key = services.issue_api_token(person, actor=actor)
            elif request.POST.get("do") == "revoke":
                if services.revoke_api_token(person, actor=actor):
                    messages.success(
                        request,
                        gettext("The API token of %(person)s is revoked.") % {"person": person},
                    )
                return redirect("admin:auth_user_api_token", user_id=person.pk)
            else:
                return HttpResponse("Say what to do: issue or revoke.", status=400)
            person = User.objects.select_related("auth_token").get(pk=person.pk)
        token = getattr(person, "auth_token", None)
        context = {
            **self.admin_site.each_context(request),
            "title": f"API token of {person.get_username()}",
            "person": person,
            "opts": self.opts,
            "prefix": services.token_prefix(token.key) if token is not None else None,
            "created": token.created if token is not None else None,
            "new_key": new_key,
        }
        response = TemplateResponse(request, "admin/ledger/api_token.html", context)
        # The one response that holds a key: no cache keeps it.
        response["Cache-Control"] = "no-store"
        return response
