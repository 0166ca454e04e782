package console

// WriteHumanMercury is writeHumanMercury for the browser test.
var WriteHumanMercury = writeHumanMercury
