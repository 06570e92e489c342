// "Check my pack": read the pack's DataMatrix with the camera or from a photo (ZXing, vendored in
// zxing-library.min.js), put the decoded text, as read, in the barcode field and send the form. The
// server reads the text (drugs.gs1); nothing is decoded or decided here. Without JavaScript, or without
// a camera, the page is the plain form.
(function () {
  "use strict";
  var scanner = document.getElementById("scanner");
  var form = document.getElementById("check-form");
  if (!scanner || !form || typeof ZXing === "undefined") { return; }
  var field = document.getElementById("id_gs1");
  var status = document.getElementById("scan-status");
  var video = document.getElementById("scan-video");
  var startButton = document.getElementById("scan-start");
  var photo = document.getElementById("scan-photo");
  var reader = new ZXing.BrowserDatamatrixCodeReader();
  scanner.hidden = false;

  function say(text) { status.textContent = text; }

  function send(text) {
    // A leading group separator is the barcode's FNC1 mark; the rest goes as decoded.
    field.value = text.replace(/^\u001d/, "");
    reader.reset();
    form.submit();
  }


  if (navigator.mediaDevices && navigator.mediaDevices.getUserMedia) {
    startButton.hidden = false;
    startButton.addEventListener("click", function () {
      video.hidden = false;
      say(scanner.dataset.looking);
      reader.decodeFromVideoDevice(null, video, function (result) {
        if (result) { send(result.getText()); }
      }).catch(function () { video.hidden = true; say(scanner.dataset.noCamera); });
    });
  }

  photo.addEventListener("change", function () {
    var file = photo.files && photo.files[0];
    if (!file) { return; }
    var url = URL.createObjectURL(file);
    say(scanner.dataset.reading);
    reader.decodeFromImageUrl(url).then(function (result) {
      URL.revokeObjectURL(url);
      send(result.getText());
    }).catch(function () {
      URL.revokeObjectURL(url);
      say(scanner.dataset.notFound);
    });
  });
})();
