// Built when the package trait RecordMacro is off (the default): the plugin's own file is then empty, and nothing
// uses this program (SQLCipherKitRecordMacro, the only module that names the plugin, is empty too).
#if !RecordMacro
@main
enum TraitOffFallback {
    static func main() {}
}
#endif
