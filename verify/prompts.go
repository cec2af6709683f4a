package verify

// DefaultPrompts are the 12 prompts of the greedy reproduction check when none are given: short
// story and prose openings of the kind small models are trained on.
var DefaultPrompts = []string{
	"Once upon a time",
	"One day, a little girl named Lily",
	"The sun was shining and",
	"Tom and his dog went to the park.",
	"There was a big, red ball",
	"The cat sat on the mat and",
	"In a small house near the forest, there lived",
	"Mom said, \"",
	"The little bird wanted to fly, but",
	"Ben had a toy car. He",
	"It was a rainy day, so",
	"The king of the land was",
}
