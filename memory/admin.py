"""Read-only admin for facts, decisions and the read sets they read. Facts are written only by assert_claim, decisions
only by record_decision, so nobody (superusers included) may add, change or delete them here."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from core.admin_base import ReadOnlyAdmin
from memory import replay
from memory.models import Decision, Fact, ReadSet, ReadSetMember


class BelievedFilter(admin.SimpleListFilter):
    title = "believed"
    parameter_name = "believed"

    def lookups(self, request, model_admin):
        return [("yes", "Believed now"), ("no", "Retracted")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.believed()
        if self.value() == "no":
            return queryset.retracted()
        return queryset


def _fact_link(fact_id, label):
    return format_html('<a href="{}">{}</a>', reverse("admin:memory_fact_change", args=[fact_id]), label)


@admin.register(Fact)
class FactAdmin(ReadOnlyAdmin):
    list_display = ["fact_key", "version", "kind", "subject", "lot", "believed", "source", "asserted_at",
                    "retracted_at"]
    list_filter = ["kind", "source", BelievedFilter]
    search_fields = ["subject", "lot", "fact_key", "attributes__recall_number"]
    ordering = ["-asserted_at", "-id"]
    show_full_result_count = False  # the facts table is large; skip the unfiltered COUNT(*)
    fields = ["fact_key", "version", "version_chain", "kind", "subject", "lot", "statement", "attributes",
              "source", "source_ref", "valid_from", "valid_to", "asserted_at", "asserted_by", "retracted_at",
              "retracted_by", "retraction_reason", "superseded_by", "content_hash"]  # not the embedding
    readonly_fields = ["version_chain"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    @admin.display(boolean=True)
    def believed(self, fact):
        return fact.retracted_at is None

    @admin.display(description="Version chain of this key")
    def version_chain(self, fact):
        chain = Fact.objects.filter(fact_key=fact.fact_key).defer("embedding").order_by("version")
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((_fact_link(v.id, f"v{v.version}") if v.id != fact.id else format_html("<b>v{} (this)</b>", v.version),
              v.asserted_at, v.retracted_at or "believed", v.retraction_reason, v.statement[:200])
             for v in chain))
        return format_html(
            "<table><thead><tr><th>version</th><th>asserted</th><th>retracted</th><th>reason</th><th>statement</th>"
            "</tr></thead><tbody>{}</tbody></table>", rows)


class ReadSetMemberInline(admin.TabularInline):
    model = ReadSetMember
    fields = ["rank", "fact_link", "fact_key", "fact_version", "score", "load_bearing", "retracted_now"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("fact").defer("fact__embedding")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="fact")
    def fact_link(self, read):
        return _fact_link(read.fact_id, f"{read.fact_key} v{read.fact_version}")

    @admin.display(boolean=True)
    def retracted_now(self, read):
        return read.fact.retracted_at is not None


@admin.register(ReadSet)
class ReadSetAdmin(ReadOnlyAdmin):
    list_display = ["id", "size"]
    search_fields = ["id"]
    inlines = [ReadSetMemberInline]


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = ["id", "decided_at", "patient_link", "subject", "verdict", "reasoner", "overridden", "status",
                    "replay_link"]
    list_filter = ["verdict", "status", "reasoner"]
    search_fields = ["question", "subject", "public_id"]
    raw_id_fields = ["replaces"]
    ordering = ["-decided_at", "-id"]
    fields = ["public_id", "patient_link", "region", "question", "subject", "verdict", "answer", "reasoner",
              "reasoner_verdict", "guardrail_override", "inputs_hash", "status", "replaces", "decided_at",
              "superseded_at", "read_set_link", "reads_table", "replay_link"]
    readonly_fields = ["public_id", "patient_link", "read_set_link", "reads_table", "replay_link"]

    @admin.display(description="read set")
    def read_set_link(self, decision):
        if decision.read_set_id is None:
            return "-"
        return format_html('<a href="{}">{}</a>', reverse("admin:memory_readset_change", args=[decision.read_set_id]),
                           decision.read_set_id)

    @admin.display(description="reads")
    def reads_table(self, decision):
        """Its read set's members: shared with other decisions, so shown here rather than as an inline."""
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((r.rank, _fact_link(r.fact_id, f"{r.fact_key} v{r.fact_version}"), r.score,
              "yes" if r.load_bearing else "no", "retracted" if r.fact.retracted_at else "believed")
             for r in decision.reads.select_related("fact").defer("fact__embedding")))
        return format_html(
            "<table><thead><tr><th>rank</th><th>fact</th><th>score</th><th>load-bearing</th><th>now</th>"
            "</tr></thead><tbody>{}</tbody></table>", rows)

    @admin.display(description="patient", ordering="patient_id")
    def patient_link(self, decision):
        """The patient's id, linked to their admin page: a decision holds its patient by id only (memory
        sits below patients), so the list reads no patient rows."""
        if decision.patient_id is None:
            return "-"
        return format_html('<a href="{}">patient {}</a>',
                           reverse("admin:patients_patient_change", args=[decision.patient_id]), decision.patient_id)

    @admin.display(boolean=True, description="guardrail override")
    def overridden(self, decision):
        return bool(decision.guardrail_override)

    @admin.display(description="replay")
    def replay_link(self, decision):
        return format_html('<a href="{}">replay</a>', reverse("admin:memory_decision_replay", args=[decision.pk]))

    def get_urls(self):
        return [path("<int:decision_id>/replay/", self.admin_site.admin_view(self.replay_view),
                     name="memory_decision_replay")] + super().get_urls()

    def replay_view(self, request, decision_id):
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            result = replay.replay_decision_routes(decision_id)
        except ValueError as exc:
            raise Http404(str(exc)) from exc
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "result": result,
                   "decision": result["decision"], "title": f"Replay of decision {decision_id}"}
        return TemplateResponse(request, "admin/memory/decision_replay.html", context)
