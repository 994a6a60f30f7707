// Built when the package trait Examples is off (the default): the program's own files are then empty.
#if !Examples
import TraitFallback

@main
enum TraitOffFallback {
    static func main() { exitBecauseTraitIsOff(program: "sqlcipherkit-fluent-benchmarks", trait: "Examples") }
}
#endif
