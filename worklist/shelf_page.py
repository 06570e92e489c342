"""The shelf page (/shelf/) and its CSV: pharmacists and pharmacy staff, each seeing the sites they work at (ADR 0015).
Thin views: the filter form, one read (worklist.site_shelf), render or write the CSV."""

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core.exports import csv_writer
from core.roles import SHELF_SCREEN, requires_permission
from shelf import selectors

from . import site_shelf
from .forms import ShelfFilterForm

shelf_reader_required = requires_permission(SHELF_SCREEN, "Only pharmacists and pharmacy staff may see the shelf.")


def _filtered(request):
    """(form, SiteShelf or None): a filter the person may not use is refused with its reason, showing nothing."""
    held = selectors.held_sites(request.user)
    form = ShelfFilterForm(request.GET, sites=site_shelf.site_choices(request.user),
                           recalls=selectors.recalls_at(held))
    if not form.is_valid():
        return form, None
    return form, site_shelf.site_shelf(request.user, site=form.cleaned_data["site"],
                                       recall_number=form.cleaned_data["recall"])


@require_GET
@shelf_reader_required
def shelf_home(request):
    form, page = _filtered(request)
    return render(request, "worklist/shelf_page.html", {"form": form, "s": page},
                  status=200 if page is not None else 400)


@require_GET
@shelf_reader_required
def shelf_csv(request):
    form, page = _filtered(request)
    if page is None:
        return HttpResponse("; ".join(e for errors in form.errors.values() for e in errors), status=400,
                            content_type="text/plain; charset=utf-8")
    name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in (form.cleaned_data["site"] or "my-sites"))
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="shelf-{name}-stock.csv"'
    writer = csv_writer(response)
    writer.writerow(site_shelf.STOCK_COLUMNS)
    writer.writerows(site_shelf.stock_csv_rows(page.lots))
    return response
